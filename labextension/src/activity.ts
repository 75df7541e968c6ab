/**
 * The sidebar's activity rows and its clock: what each audit record says, in
 * the words and the tone every view of the broker uses.
 *
 * The kernel names each record's outcome (`activity[].outcome`, see
 * PROTOCOL.md): `allowed` (green); `asked for consent`, `not granted yet`,
 * `withdrawn`, `timed out`, `failed` (grey); `refused` (red). The panel shows
 * that word as it is, so the sidebar, the dashboard and `status()` never
 * disagree; only for an older kernel that sends no outcome does it fall back
 * to the record's `decision`. Pure functions: no DOM, no model.
 */

import { IActivity, IOutcome, Tone } from './protocol';

/**
 * One row of the Activity section, newest first.
 */
export interface IActivityRow {
  /** The record's time, on the 24-hour clock. */
  time: string;
  server: string;
  method: string;
  path: string | null;
  /** The outcome's word: `allowed`, `asked for consent`, `refused` … */
  word: string;
  tone: Tone;
  /** The row's DOM classes: `fsbroker-activity-row fsbroker-tone-<tone>`. */
  className: string;
  /** What the record says besides its word (error, reason, cause), for the row's title. */
  detail: string;
}

/**
 * A time as the sidebar shows it: local, 24-hour, `14:05:09` (the dashboard
 * and `status()` read the same clock). Text that is no time is shown as it is.
 */
export function clockTime(iso: string): string {
  const date = new Date(iso);
  if (isNaN(date.getTime())) {
    return iso;
  }
  const two = (n: number) => String(n).padStart(2, '0');
  return `${two(date.getHours())}:${two(date.getMinutes())}:${two(date.getSeconds())}`;
}

/**
 * The outcome of a record from a kernel that names none: its decision only.
 */
export function fallbackOutcome(record: IActivity): IOutcome {
  if (record.decision === 'allow') {
    return record.error
      ? { word: 'failed', tone: 'grey' }
      : { word: 'allowed', tone: 'green' };
  }
  if (record.reason === 'not_granted' && !record.cause) {
    return { word: 'not granted yet', tone: 'grey' };
  }
  return { word: 'refused', tone: 'red' };
}

/**
 * The Activity section's rows, newest first, from the state's records (oldest first).
 */
export function activityRows(activity: readonly IActivity[]): IActivityRow[] {
  return [...activity].reverse().map(record => {
    const outcome = record.outcome ?? fallbackOutcome(record);
    const detail = [record.error, record.reason, record.cause]
      .filter(part => !!part)
      .join(': ');
    return {
      time: clockTime(record.at),
      server: record.server,
      method: record.method,
      path: record.path,
      word: outcome.word,
      tone: outcome.tone,
      className: `fsbroker-activity-row fsbroker-tone-${outcome.tone}`,
      detail
    };
  });
}
