/**
 * Signing in from the page: the relay of the callback page's redirects, the
 * page's place in the `hello`, and the sidebar's words.
 */

import { BrokerModel, IMessageSink } from '../model';
import {
  hello,
  IAuthState,
  IBrokerState,
  IConnection,
  PROTOCOL_VERSION
} from '../protocol';
import {
  IChannel,
  pageOrigin,
  probeLoopback,
  SignInRelay,
  signInWords,
  stateOf,
  waitingSignIn
} from '../signin';

const AUTHORIZE = 'http://127.0.0.1:9000/auth?client_id=x&code_challenge=y';

function auth(overrides: Partial<IAuthState> = {}): IAuthState {
  return {
    status: 'waiting',
    issuer: 'http://127.0.0.1:9000',
    resource: 'http://127.0.0.1:9100/mcp',
    expiresAt: null,
    error: null,
    signIn: {
      id: 'signin_1',
      url: `${AUTHORIZE}&state=S1`,
      receiver: 'page'
    },
    ...overrides
  };
}

function connection(id: string, entry: IAuthState | null): IConnection {
  return {
    id,
    name: `server-${id}`,
    serverName: 'analysis',
    transport: 'http',
    target: 'http://127.0.0.1:9100/mcp',
    state: 'connecting',
    closeReason: null,
    protocolVersion: null,
    auth: entry
  };
}

function state(connections: IConnection[]): IBrokerState {
  return {
    packageVersion: '0.1.0',
    closed: false,
    roots: [],
    connections,
    grants: [],
    locks: [],
    consents: [],
    outcomes: [],
    changes: [],
    activity: [],
    subshells: { supported: true, used: true }
  };
}

class RecordingSink implements IMessageSink {
  sent: Record<string, any>[] = [];
  post(message: Record<string, unknown>): void {
    this.sent.push(message);
  }
}

class FakeChannel implements IChannel {
  onmessage: ((event: MessageEvent) => void) | null = null;
  posted: unknown[] = [];
  closed = false;
  postMessage(data: unknown): void {
    this.posted.push(data);
  }
  close(): void {
    this.closed = true;
  }
  /** A message from the callback page. */
  deliver(data: unknown): void {
    this.onmessage?.({ data } as MessageEvent);
  }
}

let seq = 0;
function kernel(connections: IConnection[]): {
  model: BrokerModel;
  sink: RecordingSink;
} {
  const model = new BrokerModel();
  const sink = new RecordingSink();
  model.setSink(sink);
  model.receive({
    version: PROTOCOL_VERSION,
    type: 'snapshot',
    seq: ++seq,
    state: state(connections)
  });
  return { model, sink };
}

function answer(model: BrokerModel, sink: RecordingSink, ok: boolean): void {
  const last = sink.sent[sink.sent.length - 1];
  model.receive({
    version: PROTOCOL_VERSION,
    type: 'result',
    id: last.id,
    ok,
    message: ok ? 'Signed in to server-c1.' : 'No sign-in is waiting for this.'
  });
}

describe('stateOf', () => {
  it('reads the state of a query or of a whole address', () => {
    expect(stateOf('?code=abc&state=S1&iss=x')).toBe('S1');
    expect(stateOf('https://hub/user/ada/lab?state=S2#frag')).toBe('S2');
    expect(stateOf('?code=abc')).toBeNull();
    expect(stateOf('state=S1')).toBeNull();
  });
});

describe('pageOrigin', () => {
  it('offers the callback page where extensions are served below the base URL', () => {
    expect(
      pageOrigin(
        'https://hub.example',
        '/user/ada/',
        '/user/ada/lab/extensions'
      )
    ).toEqual({
      origin: 'https://hub.example',
      baseUrl: '/user/ada/',
      callbackPage: true
    });
    expect(pageOrigin('http://127.0.0.1:8888', '', '/lab/extensions/')).toEqual(
      {
        origin: 'http://127.0.0.1:8888',
        baseUrl: '/',
        callbackPage: true
      }
    );
    expect(
      pageOrigin('http://127.0.0.1:8888', '/', '/extensions').callbackPage
    ).toBe(false);
  });

  it('goes into the hello as optional fields', () => {
    expect(
      hello('jupyterlab', pageOrigin('https://hub', '/u/', '/u/lab/extensions'))
    ).toEqual({
      version: PROTOCOL_VERSION,
      type: 'hello',
      client: 'jupyterlab',
      origin: 'https://hub',
      baseUrl: '/u/',
      callbackPage: true
    });
    expect(hello('notebook')).toEqual({
      version: PROTOCOL_VERSION,
      type: 'hello',
      client: 'notebook'
    });
  });
});

describe('SignInRelay', () => {
  it('hands the redirect only to the kernel waiting for its state, and acknowledges its answer', async () => {
    const waiting = kernel([connection('c1', auth())]);
    const other = kernel([
      connection(
        'c2',
        auth({
          signIn: {
            id: 'signin_2',
            url: `${AUTHORIZE}&state=S2`,
            receiver: 'page'
          }
        })
      ),
      connection('c3', null)
    ]);
    const channel = new FakeChannel();
    const relay = new SignInRelay(() => [other.model, waiting.model], channel);
    const search = '?code=c0de&state=S1&iss=http%3A%2F%2F127.0.0.1%3A9000';
    const handled = relay.handle({ type: 'oauth-redirect', search });
    await Promise.resolve();
    expect(other.sink.sent).toEqual([]);
    expect(waiting.sink.sent).toEqual([
      {
        version: PROTOCOL_VERSION,
        type: 'action',
        id: 'a1',
        action: 'sign_in_response',
        signIn: 'signin_1',
        address: search
      }
    ]);
    answer(waiting.model, waiting.sink, true);
    const ack = {
      type: 'oauth-ack',
      state: 'S1',
      ok: true,
      message: 'Signed in to server-c1.'
    };
    await expect(handled).resolves.toEqual(ack);
    expect(channel.posted).toEqual([ack]);
  });

  it('passes the kernel’s refusal on to the page', async () => {
    const waiting = kernel([connection('c1', auth())]);
    const channel = new FakeChannel();
    const relay = new SignInRelay(() => [waiting.model], channel);
    channel.deliver({ type: 'oauth-redirect', search: '?code=x&state=S1' });
    await Promise.resolve();
    answer(waiting.model, waiting.sink, false);
    await new Promise(resolve => setTimeout(resolve, 0));
    expect(channel.posted).toEqual([
      {
        type: 'oauth-ack',
        state: 'S1',
        ok: false,
        message: 'No sign-in is waiting for this.'
      }
    ]);
    relay.dispose();
    expect(channel.closed && channel.onmessage === null).toBe(true);
  });

  it('stays silent for a state no kernel of this tab waits for, and for anything else', async () => {
    const signedIn = kernel([
      connection('c1', auth({ status: 'signed_in' })) // the same URL, no longer waiting
    ]);
    const notReady = new BrokerModel();
    const channel = new FakeChannel();
    const relay = new SignInRelay(() => [signedIn.model, notReady], channel);
    for (const data of [
      { type: 'oauth-redirect', search: '?code=x&state=S1' },
      { type: 'oauth-redirect', search: '?code=x&state=S9' },
      { type: 'oauth-redirect', search: '?code=x' },
      { type: 'oauth-ack', state: 'S1', ok: true, message: '' },
      'oauth-redirect',
      null
    ]) {
      await expect(relay.handle(data)).resolves.toBeNull();
    }
    expect(signedIn.sink.sent).toEqual([]);
    expect(channel.posted).toEqual([]);
  });

  it('finds a waiting sign-in by the state of its authorization URL', () => {
    const waiting = kernel([connection('c1', auth())]);
    expect(waitingSignIn([waiting.model], 'S1')?.signIn.id).toBe('signin_1');
    expect(waitingSignIn([waiting.model], 'S2')).toBeNull();
  });
});

describe('signInWords', () => {
  it('says how each connection stands with its authorization server', () => {
    expect(
      signInWords(
        auth({
          status: 'signed_in',
          expiresAt: '2026-12-02T06:00:00.000Z',
          signIn: null
        }),
        () => '06:00'
      )
    ).toBe('Signed in to http://127.0.0.1:9000 · expires 06:00');
    expect(signInWords(auth())).toBe('Waiting for sign-in');
    expect(
      signInWords(
        auth({ status: 'failed', error: 'state_mismatch', signIn: null })
      )
    ).toBe('Sign-in failed: the answer did not belong to this sign-in');
    expect(
      signInWords(auth({ status: 'failed', error: 'new_kind', signIn: null }))
    ).toBe('Sign-in failed: new_kind');
    expect(signInWords(auth({ status: 'signed_out', signIn: null }))).toBe(
      'Signed out'
    );
  });
});

describe('BrokerModel sign-in actions', () => {
  it('sends sign_out for a connection', () => {
    const { model, sink } = kernel([
      connection('c1', auth({ status: 'signed_in' }))
    ]);
    void model.signOut('c1');
    expect(sink.sent).toEqual([
      {
        version: PROTOCOL_VERSION,
        type: 'action',
        id: 'a1',
        action: 'sign_out',
        connection: 'c1'
      }
    ]);
  });
});

describe('probeLoopback', () => {
  const url = 'http://127.0.0.1:41234/probe/Zk3x9Q_abc-123';

  function recording(): {
    fetcher: (url: string, init: RequestInit) => Promise<unknown>;
    calls: [string, RequestInit][];
  } {
    const calls: [string, RequestInit][] = [];
    return {
      calls,
      fetcher: (u, init) => {
        calls.push([u, init]);
        return Promise.reject(new Error('refused')); // a remote kernel: nothing there
      }
    };
  }

  it('fetches the probe, opaque, from a loopback page', () => {
    const { fetcher, calls } = recording();
    expect(probeLoopback(url, 'http://127.0.0.1:8888', fetcher)).toBe(true);
    expect(probeLoopback(url, 'http://localhost:8888', fetcher)).toBe(true);
    expect(calls).toEqual([
      [url, { mode: 'no-cors', cache: 'no-store', credentials: 'omit' }],
      [url, { mode: 'no-cors', cache: 'no-store', credentials: 'omit' }]
    ]);
  });

  it('never fetches from a page elsewhere, nor anything but a loopback probe', () => {
    const { fetcher, calls } = recording();
    expect(probeLoopback(url, 'https://hub.example.com', fetcher)).toBe(false);
    for (const other of [
      'http://10.0.0.1:41234/probe/Zk3x9Q_abc-123',
      'http://127.0.0.1:41234/callback?code=x',
      'http://127.0.0.1:41234/probe/short',
      'http://127.0.0.1.evil.example/probe/Zk3x9Q_abc-123'
    ]) {
      expect(probeLoopback(other, 'http://127.0.0.1:8888', fetcher)).toBe(
        false
      );
    }
    expect(calls).toEqual([]);
  });

  it('is what a probe message from the kernel asks for', () => {
    const model = new BrokerModel();
    const asked: string[] = [];
    model.probeRequested.connect((_, u) => asked.push(u));
    model.receive({ version: PROTOCOL_VERSION, type: 'probe', url });
    model.receive({ version: PROTOCOL_VERSION, type: 'probe' });
    expect(asked).toEqual([url]);
  });
});
