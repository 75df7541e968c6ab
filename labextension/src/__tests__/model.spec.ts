/**
 * The models, fed the panel protocol's messages as a kernel would send them.
 */

import fixture from '../../fixtures/panel-messages.json';
import { BrokerModel, FileBrokerModel, IMessageSink } from '../model';
import {
  hello,
  IBrokerState,
  IConsent,
  PROTOCOL_VERSION,
  refresh
} from '../protocol';
import { pageOrigin, signInWords, waitingSignIn } from '../signin';

function consent(id: string): IConsent {
  return {
    id,
    server: 'analysis',
    connectionId: 'c1',
    message: 'Profile the sales data',
    operations: ['read'],
    items: [
      {
        path: 'data/sales.csv',
        rel: 'data/sales.csv',
        approvable: true,
        reason: null,
        readOnly: false,
        operations: ['read'],
        grantable: ['read']
      }
    ],
    already: [],
    createdAt: '2026-11-29T12:00:00.000Z',
    deadline: '2026-11-29T12:02:00.000Z'
  };
}

function state(overrides: Partial<IBrokerState> = {}): IBrokerState {
  return {
    packageVersion: '0.1.0',
    closed: false,
    roots: [{ name: 'data', path: '/home/ana/data', readOnly: false }],
    connections: [
      {
        id: 'c1',
        name: 'analysis',
        serverName: 'analysis-server',
        transport: 'stdio',
        target: 'python -m analysis',
        state: 'open',
        closeReason: null,
        protocolVersion: '2025-11-25'
      },
      {
        id: 'c2',
        name: 'old',
        serverName: '',
        transport: 'http',
        target: 'http://127.0.0.1:1/mcp',
        state: 'closed',
        closeReason: 'closed by the user',
        protocolVersion: null
      }
    ],
    grants: [],
    locks: [
      {
        id: 'lock_1',
        path: 'data/sales.csv',
        connectionId: 'c1',
        server: 'analysis',
        mode: 'exclusive',
        since: '2026-11-29T12:00:00.000Z'
      }
    ],
    consents: [],
    outcomes: [],
    changes: [],
    activity: [],
    subshells: { supported: true, used: true },
    ...overrides
  };
}

let seq = 0;
function snapshot(s: IBrokerState): Record<string, unknown> {
  return { version: PROTOCOL_VERSION, type: 'snapshot', seq: ++seq, state: s };
}

class RecordingSink implements IMessageSink {
  sent: Record<string, any>[] = [];
  post(message: Record<string, unknown>): void {
    this.sent.push(message);
  }
}

/**
 * The status bar's words while *model* is the current notebook's.
 */
function summaryOf(model: BrokerModel): string {
  const facade = new FileBrokerModel();
  facade.current = model;
  return facade.summary;
}

describe('BrokerModel', () => {
  it('becomes ready with the first snapshot and counts open servers and kept locks', () => {
    const model = new BrokerModel('sales.ipynb');
    let changes = 0;
    model.changed.connect(() => changes++);
    model.setStatus('connecting');
    model.receive(snapshot(state()));
    expect(model.status).toBe('ready');
    expect(model.openConnections).toBe(1);
    expect(model.lockCount).toBe(1);
    expect(changes).toBeGreaterThanOrEqual(2);

    const facade = new FileBrokerModel();
    facade.current = model;
    expect(facade.summary).toBe('File broker: 1 server · 1 lock');
  });

  it('counts only open connections as servers, and a first sign-in apart', () => {
    const model = new BrokerModel();
    const [analysis, old] = state().connections;
    const starting = {
      ...analysis,
      id: 'c3',
      name: 'slow',
      state: 'connecting'
    };
    const waiting = {
      ...analysis,
      id: 'signing-in:abc',
      name: 'remote',
      state: 'connecting'
    };
    model.receive(
      snapshot(state({ connections: [analysis, old, starting, waiting] }))
    );
    expect(model.openConnections).toBe(1);
    expect(model.signingIn).toBe(1);
    expect(summaryOf(model)).toBe(
      'File broker: 1 server · 1 signing in · 1 lock'
    );
  });

  it('drops a snapshot overtaken by a newer one', () => {
    const model = new BrokerModel();
    const newer = snapshot(state());
    const older = { ...snapshot(state({ locks: [] })), seq: 0 };
    model.receive(newer);
    model.receive(older);
    expect(model.lockCount).toBe(1);
  });

  it('says which consent requests started and stopped waiting, with their outcome', () => {
    const model = new BrokerModel();
    const added: string[][] = [];
    const ended: [string, string | null][] = [];
    model.consentsAdded.connect((_, list) => added.push(list.map(c => c.id)));
    model.consentsEnded.connect((_, list) =>
      list.forEach(e => ended.push([e.id, e.outcome?.answeredBy ?? null]))
    );
    model.receive(snapshot(state({ consents: [consent('consent_a')] })));
    model.receive(snapshot(state({ consents: [consent('consent_a')] })));
    expect(added).toEqual([['consent_a']]);
    model.receive(
      snapshot(
        state({
          consents: [consent('consent_b')],
          outcomes: [
            {
              id: 'consent_a',
              server: 'analysis',
              outcome: 'approved',
              text: 'Approved read on data/sales.csv for this connection',
              answeredBy: 'notebook',
              at: '2026-11-29T12:00:05.000Z'
            }
          ]
        })
      )
    );
    expect(added).toEqual([['consent_a'], ['consent_b']]);
    expect(ended).toEqual([['consent_a', 'notebook']]);
    // The link goes down: what still waited ends without an outcome.
    model.setStatus('restarting');
    expect(ended).toEqual([
      ['consent_a', 'notebook'],
      ['consent_b', null]
    ]);
    expect(model.state).toBeNull();
  });

  it('sends actions with an id and resolves them with the kernel’s result', async () => {
    const model = new BrokerModel();
    const sink = new RecordingSink();
    model.setSink(sink);
    model.receive(snapshot(state()));
    const done = model.disconnect('c1');
    expect(sink.sent).toEqual([
      {
        version: PROTOCOL_VERSION,
        type: 'action',
        id: 'a1',
        action: 'disconnect',
        connection: 'c1'
      }
    ]);
    model.receive({
      version: PROTOCOL_VERSION,
      type: 'result',
      id: 'a1',
      ok: true,
      message: 'Disconnected analysis.'
    });
    await expect(done).resolves.toEqual({
      ok: true,
      message: 'Disconnected analysis.'
    });
    expect(model.lastResult?.message).toBe('Disconnected analysis.');

    const answer = model.answerConsent(
      'consent_a',
      [{ path: 'data/sales.csv', operations: ['read'] }],
      900
    );
    expect(sink.sent[1]).toMatchObject({
      action: 'answer_consent',
      consent: 'consent_a',
      approved: [{ path: 'data/sales.csv', operations: ['read'] }],
      duration: 900
    });
    // The kernel goes away before it answers: the action fails, it never hangs.
    model.setStatus('unloaded', 'the extension was unloaded');
    await expect(answer).resolves.toMatchObject({ ok: false });
  });

  it('counts a running call’s seconds on from the snapshot, with this page’s clock', () => {
    const model = new BrokerModel();
    const call = {
      id: 'call1',
      connectionId: 'c1',
      server: 'analysis',
      tool: 'watch_changes',
      startedAt: '2026-11-29T12:00:00.000Z',
      elapsed: 12.4
    };
    const before = Date.now();
    model.receive(snapshot(state({ calls: [call] })));
    expect(model.runningCalls).toEqual([call]);
    // Whatever the kernel's clock says of startedAt: 12.4 s then, 3 s more here.
    const later = Date.now() + 3000;
    expect(model.callSeconds(call, later)).toBeGreaterThanOrEqual(15);
    expect(model.callSeconds(call, later)).toBeLessThanOrEqual(
      15 + Math.ceil((Date.now() - before) / 1000)
    );
    // An older kernel sends no calls.
    model.receive(snapshot(state()));
    expect(model.runningCalls).toEqual([]);
  });

  it('refuses actions when there is no broker to act on', async () => {
    const model = new BrokerModel();
    model.setStatus('not-loaded');
    await expect(model.revoke('g_1')).resolves.toMatchObject({ ok: false });
    const facade = new FileBrokerModel();
    facade.current = model;
    expect(facade.summary).toBe('File broker: off');
  });

  it('reports a kernel that speaks another protocol version', () => {
    const model = new BrokerModel();
    model.receive(snapshot(state()));
    model.receive({
      version: PROTOCOL_VERSION + 1,
      type: 'snapshot',
      seq: 99,
      state: {}
    });
    expect(model.status).toBe('mismatch');
    expect(model.kernelProtocol).toBe(PROTOCOL_VERSION + 1);
    expect(model.state).toBeNull();

    const other = new BrokerModel();
    other.receive({
      version: PROTOCOL_VERSION,
      type: 'error',
      code: 'version_mismatch',
      message: 'this kernel speaks panel protocol 1, the panel 2',
      supported: [1]
    });
    expect(other.status).toBe('mismatch');
  });

  it('tells when actions may wait for a running cell', () => {
    const model = new BrokerModel();
    model.frontendSubshells = true;
    model.receive(snapshot(state()));
    expect(model.actionsMayWait).toBe(false);
    model.receive(
      snapshot(state({ subshells: { supported: false, used: false } }))
    );
    expect(model.actionsMayWait).toBe(true);
    model.receive(snapshot(state()));
    model.frontendSubshells = false;
    expect(model.actionsMayWait).toBe(true);
  });

  it('ignores messages that are not of the protocol', () => {
    const model = new BrokerModel();
    const warn = jest
      .spyOn(console, 'warn')
      .mockImplementation(() => undefined);
    model.receive(snapshot(state()));
    model.receive('nonsense');
    model.receive({ version: PROTOCOL_VERSION, type: 'gossip' });
    expect(model.status).toBe('ready');
    expect(warn).toHaveBeenCalledTimes(2);
    warn.mockRestore();
  });
});

describe('FileBrokerModel', () => {
  it('follows the current model and re-emits its changes', () => {
    const facade = new FileBrokerModel();
    const first = new BrokerModel('a.ipynb');
    const second = new BrokerModel('b.ipynb');
    let changes = 0;
    facade.changed.connect(() => changes++);
    facade.current = first;
    first.receive(snapshot(state()));
    facade.current = second;
    const before = changes;
    first.receive(snapshot(state({ locks: [] })));
    expect(changes).toBe(before); // the old model no longer counts
    second.setStatus('connecting');
    expect(changes).toBe(before + 1);
    expect(facade.summary).toBe('File broker');
    facade.current = null;
    expect(facade.summary).toBe('File broker');
  });
});

/**
 * One of each message of PROTOCOL.md, shared with the kernel's tests
 * (`tests/kernel/test_panel_protocol.py`): both sides read and write the same bytes.
 */
describe('the shared fixture of panel messages', () => {
  const { panelToKernel: fromPanel, kernelToPanel: toPanel } = fixture;

  it('is what the panel sends: hello, refresh and each action', async () => {
    expect(hello('jupyterlab')).toEqual(fromPanel.hello);
    expect(
      hello(
        'jupyterlab',
        pageOrigin(
          'https://hub.example.com',
          '/user/ada/',
          '/user/ada/lab/extensions'
        )
      )
    ).toEqual(fromPanel.hello_page);
    expect(refresh()).toEqual(fromPanel.refresh);
    const model = new BrokerModel();
    const sink = new RecordingSink();
    model.setSink(sink);
    model.receive(toPanel.snapshot_sign_in);
    void model.disconnect('c1');
    void model.revoke('g_1');
    const released = model.forceUnlock('lock_1');
    void model.answerConsent(
      'consent_1',
      [{ path: 'data/sales.csv', operations: ['read'] }],
      900
    );
    void model.signOut('c2');
    // The relay finds the snapshot's waiting sign-in by its state and sends the address as is.
    const waiting = waitingSignIn([model], 'st4te');
    expect(waiting?.signIn.id).toBe('Zk3x9Q-signin');
    void model.respondToSignIn(
      waiting!.signIn.id,
      fromPanel.sign_in_response.address
    );
    void model.cancelCall('call1');
    expect(sink.sent).toEqual([
      fromPanel.disconnect,
      fromPanel.revoke,
      fromPanel.force_unlock,
      fromPanel.answer_consent,
      fromPanel.sign_out,
      fromPanel.sign_in_response,
      fromPanel.cancel_call
    ]);
    model.receive(toPanel.result);
    await expect(released).resolves.toEqual({
      ok: true,
      message: 'Lock released.'
    });
  });

  it('is what the panel reads: a snapshot, an error, a version mismatch and closing', () => {
    const model = new BrokerModel('sales.ipynb');
    const added: string[][] = [];
    model.consentsAdded.connect((_, list) => added.push(list.map(c => c.id)));
    model.receive(toPanel.snapshot);
    expect(model.status).toBe('ready');
    expect(model.openConnections).toBe(1);
    expect(model.lockCount).toBe(1);
    expect(added).toEqual([['consent_1']]);
    expect(model.runningCalls.map(c => [c.server, c.tool])).toEqual([
      ['analysis', 'watch_changes']
    ]);
    // A later snapshot with sign-ins: analysis, hosted, and remote (connecting while it waits).
    model.receive(toPanel.snapshot_sign_in);
    expect(model.openConnections).toBe(2);
    expect(model.signingIn).toBe(1);
    expect(summaryOf(model)).toBe(
      'File broker: 2 servers · 1 signing in · 1 lock'
    );
    const auth = model.state!.connections.map(c =>
      c.auth ? signInWords(c.auth, () => '13:00') : null
    );
    expect(auth).toEqual([
      null,
      'Signed in to https://as.example.com · expires 13:00',
      'Waiting for sign-in'
    ]);
    model.receive(toPanel.error);
    expect(model.lastResult).toEqual({
      ok: false,
      message: toPanel.error.message
    });
    model.receive(toPanel.closing);
    expect(model.status).toBe('unloaded');

    const other = new BrokerModel();
    other.receive(toPanel.version_mismatch);
    expect(other.status).toBe('mismatch');
  });
});
