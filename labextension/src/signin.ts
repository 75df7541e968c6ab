/**
 * Signing in to servers from this page: the relay of the OAuth callback page,
 * and the words the sidebar shows for a connection's sign-in.
 *
 * A kernel the browser cannot reach (JupyterHub, a kernel on another host)
 * asks the authorization server to send the browser back to this extension's
 * `static/oauth-callback.html`. That page posts its query on the
 * BroadcastChannel `jupyter_fsbroker.oauth`; `SignInRelay`, in every
 * JupyterLab tab, hands it to the one kernel whose snapshot shows a waiting
 * sign-in with the same `state` (action `sign_in_response`) and acknowledges
 * with the kernel's answer. A tab with no such sign-in stays silent, so the
 * page offers the address for pasting when no tab takes it.
 */

import { IDisposable } from '@lumino/disposable';

import { BrokerModel } from './model';
import { IAuthState, IPageOrigin, ISignInStep } from './protocol';

/**
 * The channel the callback page and the JupyterLab tabs of one origin share.
 */
export const OAUTH_CHANNEL = 'jupyter_fsbroker.oauth';

/**
 * Where the callback page is served, below JupyterLab's base URL.
 */
export const CALLBACK_PAGE =
  'lab/extensions/jupyter_fsbroker/static/oauth-callback.html';

/**
 * What the callback page posts: the query it was opened with.
 */
export interface IRedirectMessage {
  type: 'oauth-redirect';
  search: string;
}

/**
 * What a tab answers the page, once the kernel answered (`state` says which redirect).
 */
export interface IAckMessage {
  type: 'oauth-ack';
  state: string;
  ok: boolean;
  message: string;
}

/**
 * The part of a BroadcastChannel the relay uses.
 */
export interface IChannel {
  onmessage: ((event: MessageEvent) => void) | null;
  postMessage(data: unknown): void;
  close(): void;
}

/**
 * The `state` parameter of an address (`?…&state=…`) or a whole URL, or `null`.
 */
export function stateOf(address: string): string | null {
  const start = address.indexOf('?');
  if (start < 0) {
    return null;
  }
  const query = address.slice(start).split('#')[0];
  return new URLSearchParams(query).get('state');
}

/**
 * The kernel model and waiting sign-in whose authorization URL has *state*, if any.
 */
export function waitingSignIn(
  models: Iterable<BrokerModel>,
  state: string
): { model: BrokerModel; signIn: ISignInStep } | null {
  for (const model of models) {
    if (model.status !== 'ready' || !model.state) {
      continue;
    }
    for (const connection of model.state.connections) {
      const auth = connection.auth;
      const signIn = auth?.signIn;
      if (
        auth?.status === 'waiting' &&
        signIn &&
        stateOf(signIn.url) === state
      ) {
        return { model, signIn };
      }
    }
  }
  return null;
}

/**
 * Where this page stands, as the kernel's `hello` carries it.
 *
 * @param origin - the page's `location.origin`.
 * @param baseUrl - JupyterLab's `baseUrl` page option (a path).
 * @param labextensionsUrl - its `fullLabextensionsUrl` option: the callback page
 *   is served at `CALLBACK_PAGE` only where extensions are served at `<baseUrl>lab/extensions`.
 */
export function pageOrigin(
  origin: string,
  baseUrl: string,
  labextensionsUrl: string
): IPageOrigin {
  const base = baseUrl.endsWith('/') ? baseUrl : `${baseUrl}/`;
  const served = labextensionsUrl.replace(/\/+$/, '');
  return {
    origin,
    baseUrl: base,
    callbackPage: served === `${base}lab/extensions`
  };
}

const LOOPBACK_HOSTS = ['127.0.0.1', 'localhost', '[::1]'];
const PROBE_URL = /^http:\/\/127\.0\.0\.1:\d{1,5}\/probe\/[A-Za-z0-9_-]{8,64}$/;

/**
 * Fetch the kernel's probe URL, but only from a page on a loopback origin (a
 * page elsewhere would make the browser ask the person about local network
 * access) and only a loopback probe URL; whether it was fetched.
 */
export function probeLoopback(
  url: string,
  origin: string,
  fetcher: (url: string, init: RequestInit) => Promise<unknown> = (u, i) =>
    fetch(u, i)
): boolean {
  let host: string;
  try {
    host = new URL(origin).hostname;
  } catch {
    return false;
  }
  if (!LOOPBACK_HOSTS.includes(host) || !PROBE_URL.test(url)) {
    return false;
  }
  // Opaque (no-cors): the kernel learns of the request itself; the answer is never read.
  void fetcher(url, {
    mode: 'no-cors',
    cache: 'no-store',
    credentials: 'omit'
  }).catch(() => undefined);
  return true;
}

/**
 * Relays the callback page's redirects to the kernel that waits for them.
 */
export class SignInRelay implements IDisposable {
  /**
   * @param models - the kernel models of this tab, asked at each redirect.
   * @param channel - the channel to listen on (default: `OAUTH_CHANNEL`;
   *   none where the browser has no BroadcastChannel).
   */
  constructor(
    private readonly _models: () => Iterable<BrokerModel>,
    channel: IChannel | null = openChannel()
  ) {
    this._channel = channel;
    if (channel) {
      channel.onmessage = event => void this.handle(event.data);
    }
  }

  get isDisposed(): boolean {
    return this._channel === null;
  }

  /**
   * Hand one message of the channel to its kernel; resolves with the
   * acknowledgement posted, or `null` when this tab has no such sign-in.
   */
  async handle(data: unknown): Promise<IAckMessage | null> {
    if (!isRedirect(data)) {
      return null;
    }
    const state = stateOf(data.search);
    const found = state ? waitingSignIn(this._models(), state) : null;
    if (!state || !found || this._relaying.has(state)) {
      return null;
    }
    this._relaying.add(state);
    try {
      const result = await found.model.respondToSignIn(
        found.signIn.id,
        data.search
      );
      const ack: IAckMessage = {
        type: 'oauth-ack',
        state,
        ok: result.ok,
        message: result.message
      };
      this._channel?.postMessage(ack);
      return ack;
    } finally {
      this._relaying.delete(state);
    }
  }

  dispose(): void {
    const channel = this._channel;
    this._channel = null;
    if (channel) {
      channel.onmessage = null;
      channel.close();
    }
  }

  private _channel: IChannel | null;
  private _relaying = new Set<string>();
}

function openChannel(): IChannel | null {
  return typeof BroadcastChannel === 'undefined'
    ? null
    : new BroadcastChannel(OAUTH_CHANNEL);
}

function isRedirect(data: unknown): data is IRedirectMessage {
  return (
    typeof data === 'object' &&
    data !== null &&
    (data as IRedirectMessage).type === 'oauth-redirect' &&
    typeof (data as IRedirectMessage).search === 'string'
  );
}

/**
 * A sign-in error kind, in words.
 */
const FAILURES: Record<string, string> = {
  state_mismatch: 'the answer did not belong to this sign-in',
  issuer_mismatch: 'the answer came from another authorization server',
  resource_mismatch: 'the server names another resource than its address',
  registration_refused: 'the authorization server refused to register us',
  token_refused: 'the authorization server refused a token',
  timed_out: 'nobody completed it in time',
  cancelled: 'it was cancelled',
  step_up_limit: 'the server keeps asking for more access'
};

/**
 * What the sidebar says of a connection's sign-in.
 *
 * @param auth - the connection's `auth` entry.
 * @param time - how a time is shown (the sidebar's local time).
 */
export function signInWords(
  auth: IAuthState,
  time: (iso: string) => string = iso => iso
): string {
  switch (auth.status) {
    case 'signed_in': {
      const where = auth.issuer ?? auth.resource;
      const until = auth.expiresAt ? ` · expires ${time(auth.expiresAt)}` : '';
      return `Signed in to ${where}${until}`;
    }
    case 'waiting':
      return 'Waiting for sign-in';
    case 'failed':
      return `Sign-in failed: ${FAILURES[auth.error ?? ''] ?? auth.error ?? 'signing in failed'}`;
    default:
      return 'Signed out';
  }
}
