/**
 * The sidebar's activity rows: the kernel's words and tones as they are, one
 * 24-hour clock, and a fallback for a kernel that names no outcome.
 */

import { activityRows, clockTime, fallbackOutcome } from '../activity';
import { IActivity } from '../protocol';

function record(overrides: Partial<IActivity> = {}): IActivity {
  return {
    at: '2026-11-29T15:04:05.000Z',
    server: 'analysis',
    method: 'files/read',
    path: 'data/sales.csv',
    decision: 'allow',
    error: null,
    reason: null,
    bytes: 42,
    ...overrides
  };
}

const refusal = {
  decision: 'deny' as const,
  error: 'PERMISSION_DENIED',
  reason: 'not_granted'
};

describe('activityRows', () => {
  it('shows the kernel’s word in its tone, newest first', () => {
    const rows = activityRows([
      record({
        ...refusal,
        outcome: { word: 'asked for consent', tone: 'grey' }
      }),
      record({
        method: 'files/consent',
        decision: 'deny',
        reason: 'consent_refused',
        cause: 'consent_denied',
        outcome: { word: 'refused', tone: 'red' }
      }),
      record({ outcome: { word: 'allowed', tone: 'green' } })
    ]);
    expect(rows.map(row => [row.method, row.word, row.tone])).toEqual([
      ['files/read', 'allowed', 'green'],
      ['files/consent', 'refused', 'red'],
      ['files/read', 'asked for consent', 'grey']
    ]);
    expect(rows[1].className).toBe('fsbroker-activity-row fsbroker-tone-red');
    expect(rows[1].detail).toBe('consent_refused: consent_denied');
    expect(rows[2].className).toBe('fsbroker-activity-row fsbroker-tone-grey');
    expect(rows[2].detail).toBe('PERMISSION_DENIED: not_granted');
  });

  it('does not paint a refusal before consent red on its own', () => {
    // The kernel said grey: the panel never second-guesses it from `decision`.
    const [row] = activityRows([
      record({
        ...refusal,
        outcome: { word: 'asked for consent', tone: 'grey' }
      })
    ]);
    expect([row.word, row.tone]).toEqual(['asked for consent', 'grey']);
  });

  it('falls back to the decision for a kernel that sends no outcome', () => {
    expect(fallbackOutcome(record())).toEqual({
      word: 'allowed',
      tone: 'green'
    });
    expect(fallbackOutcome(record({ ...refusal }))).toEqual({
      word: 'not granted yet',
      tone: 'grey'
    });
    expect(
      fallbackOutcome(record({ ...refusal, reason: 'outside_roots' }))
    ).toEqual({ word: 'refused', tone: 'red' });
    expect(
      fallbackOutcome(record({ error: 'NOT_FOUND', reason: 'not_found' }))
    ).toEqual({ word: 'failed', tone: 'grey' });
    expect(activityRows([record({ ...refusal })])[0].word).toBe(
      'not granted yet'
    );
  });
});

describe('clockTime', () => {
  it('is on the 24-hour clock, local time', () => {
    const at = new Date(2026, 10, 29, 15, 4, 5).toISOString();
    expect(clockTime(at)).toBe('15:04:05');
    const morning = new Date(2026, 10, 29, 9, 0, 7).toISOString();
    expect(clockTime(morning)).toBe('09:00:07');
    expect(clockTime(new Date(2026, 10, 29, 0, 30, 0).toISOString())).toBe(
      '00:30:00'
    );
  });

  it('leaves what is no time as it is', () => {
    expect(clockTime('…')).toBe('…');
  });

  it('is the clock of every row', () => {
    const at = new Date(2026, 10, 29, 23, 59, 58).toISOString();
    expect(activityRows([record({ at })])[0].time).toBe('23:59:58');
  });
});
