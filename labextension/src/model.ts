/**
 * The models the views observe: one `BrokerModel` per kernel, and the
 * `FileBrokerModel` that follows the current notebook's.
 *
 * A model holds what the kernel last said (its snapshot) and how the link to
 * it stands, and turns the panel protocol's messages into signals. It never
 * talks to a kernel itself: a `KernelLink` (`link.ts`) feeds it and carries its
 * actions, so the models can be tested without JupyterLab.
 */

import { ISignal, Signal } from '@lumino/signaling';

import {
  Action,
  IBrokerState,
  ICall,
  IConsent,
  IConsentOutcome,
  IResultMessage,
  PROTOCOL_VERSION,
  SIGNING_IN,
  actionMessage,
  parse
} from './protocol';

/**
 * How the link to a kernel's broker stands.
 *
 * - `idle`: not asked yet (no kernel, or the kernel is starting).
 * - `connecting`: the comm is being opened.
 * - `ready`: the kernel answered; `state` is its latest snapshot.
 * - `not-loaded`: the kernel has no broker (`%load_ext jupyter_fsbroker` starts one).
 * - `unloaded`: the broker was closed (`%unload_ext`, `%reload_ext` in progress).
 * - `restarting`: the kernel is restarting.
 * - `dead`: the kernel is gone.
 * - `mismatch`: the kernel speaks another panel protocol version.
 */
export type LinkStatus =
  | 'idle'
  | 'connecting'
  | 'ready'
  | 'not-loaded'
  | 'unloaded'
  | 'restarting'
  | 'dead'
  | 'mismatch';

/**
 * Where a model's actions go: the link posts them on the comm.
 */
export interface IMessageSink {
  /**
   * Send one message to the kernel; throws when it cannot be sent.
   */
  post(message: Record<string, unknown>): void;
}

/**
 * The outcome of an action, as the kernel reported it.
 */
export interface IActionResult {
  ok: boolean;
  message: string;
}

/**
 * The broker of one kernel, as the panel sees it.
 */
export class BrokerModel {
  /**
   * @param label - what the views call this kernel (the notebook's name).
   */
  constructor(label = '') {
    this._label = label;
  }

  /**
   * The notebook (or kernel) this model stands for.
   */
  get label(): string {
    return this._label;
  }
  set label(value: string) {
    if (value !== this._label) {
      this._label = value;
      this._changed.emit();
    }
  }

  /**
   * How the link stands.
   */
  get status(): LinkStatus {
    return this._status;
  }

  /**
   * The latest snapshot, or `null` before the first one (and once the link is down).
   */
  get state(): IBrokerState | null {
    return this._state;
  }

  /**
   * The version the kernel speaks when `status` is `mismatch` (`null` if it did not say).
   */
  get kernelProtocol(): number | null {
    return this._kernelProtocol;
  }

  /**
   * Why the link is down, in words (closing reason, error).
   */
  get detail(): string {
    return this._detail;
  }

  /**
   * The outcome of the last action, for the views to show.
   */
  get lastResult(): IActionResult | null {
    return this._lastResult;
  }

  /**
   * Whether this frontend sends the panel's messages on a kernel subshell.
   */
  get frontendSubshells(): boolean | null {
    return this._frontendSubshells;
  }
  set frontendSubshells(value: boolean | null) {
    if (value !== this._frontendSubshells) {
      this._frontendSubshells = value;
      this._changed.emit();
    }
  }

  /**
   * Emitted whenever anything the views show changed.
   */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /**
   * Emitted with the consent requests that started waiting since the last snapshot.
   */
  get consentsAdded(): ISignal<this, IConsent[]> {
    return this._consentsAdded;
  }

  /**
   * Emitted with the consent requests that stopped waiting, and how each ended
   * (`null` when the kernel did not say, e.g. the link went down).
   */
  get consentsEnded(): ISignal<
    this,
    { id: string; outcome: IConsentOutcome | null }[]
  > {
    return this._consentsEnded;
  }

  /**
   * Open connections: not connecting (nor waiting for a first sign-in),
   * closing or closed.
   */
  get openConnections(): number {
    const state = this._state;
    if (!state) {
      return 0;
    }
    return state.connections.filter(c => c.state === 'open').length;
  }

  /**
   * Servers waiting for their first sign-in (not connected yet).
   */
  get signingIn(): number {
    const state = this._state;
    if (!state) {
      return 0;
    }
    return state.connections.filter(
      c => c.state === 'connecting' && c.id.startsWith(SIGNING_IN)
    ).length;
  }

  /**
   * Kept locks.
   */
  get lockCount(): number {
    return this._state ? this._state.locks.length : 0;
  }

  /**
   * Consent requests waiting for an answer.
   */
  get pendingConsents(): IConsent[] {
    return this._state ? this._state.consents : [];
  }

  /**
   * The tool calls in flight, oldest first.
   */
  get runningCalls(): ICall[] {
    return this._state?.calls ?? [];
  }

  /**
   * Whole seconds *call* has run at *now* (`Date.now()`): what the kernel said
   * in the snapshot, counted on with this page's clock since it arrived (the
   * kernel's clock may differ from the browser's).
   */
  callSeconds(call: ICall, now: number = Date.now()): number {
    return Math.floor(call.elapsed + Math.max(0, now - this._appliedAt) / 1000);
  }

  /**
   * Whether actions may be held up while a cell runs: the kernel or this
   * frontend cannot use subshells, or the kernel handled our last message on
   * its main shell.
   */
  get actionsMayWait(): boolean {
    if (this._status !== 'ready' || !this._state) {
      return false;
    }
    const subshells = this._state.subshells;
    return (
      !subshells.supported ||
      this._frontendSubshells === false ||
      (!subshells.used && this._frontendSubshells === true)
    );
  }

  /**
   * Emitted with the URL the kernel asks this page to fetch, to learn whether
   * the browser reaches the kernel's loopback (`probeLoopback` does it).
   */
  get probeRequested(): ISignal<this, string> {
    return this._probeRequested;
  }

  // -- fed by the link ----------------------------------------------------------------------

  /**
   * Attach the sink actions go to (the open comm), or detach it.
   */
  setSink(sink: IMessageSink | null): void {
    this._sink = sink;
  }

  /**
   * Record how the link stands; leaving `ready` forgets the snapshot and
   * fails the actions still waiting for their result.
   */
  setStatus(status: LinkStatus, detail = ''): void {
    if (status === this._status && detail === this._detail) {
      return;
    }
    this._status = status;
    this._detail = detail;
    if (status !== 'ready') {
      this._forget(detail || status);
    }
    this._changed.emit();
  }

  /**
   * Handle one message from the kernel.
   */
  receive(data: unknown): void {
    const parsed = parse(data);
    if (parsed.kind === 'version') {
      this._kernelProtocol = parsed.version;
      this.setStatus(
        'mismatch',
        `the kernel speaks panel protocol ${parsed.version ?? 'unknown'}, this panel ${PROTOCOL_VERSION}`
      );
      return;
    }
    if (parsed.kind === 'invalid') {
      console.warn(`jupyter_fsbroker: ignored a message (${parsed.why})`);
      return;
    }
    const message = parsed.message;
    switch (message.type) {
      case 'snapshot':
        if (message.seq <= this._seq) {
          return; // an older snapshot overtaken by a newer one
        }
        this._seq = message.seq;
        this._apply(message.state);
        break;
      case 'result':
        this._settle(message);
        break;
      case 'error':
        if (message.code === 'version_mismatch') {
          this._kernelProtocol = message.supported?.[0] ?? null;
          this.setStatus('mismatch', message.message);
        } else {
          this._lastResult = { ok: false, message: message.message };
          this._changed.emit();
        }
        break;
      case 'closing':
        this.setStatus('unloaded', message.reason);
        break;
      case 'probe':
        this._probeRequested.emit(message.url);
        break;
    }
  }

  // -- actions ------------------------------------------------------------------------------

  /**
   * End a connection now (the kill switch).
   */
  disconnect(connectionId: string): Promise<IActionResult> {
    return this.request({ action: 'disconnect', connection: connectionId });
  }

  /**
   * Revoke a grant.
   */
  revoke(grantId: string): Promise<IActionResult> {
    return this.request({ action: 'revoke', grant: grantId });
  }

  /**
   * Release a kept lock, whoever holds it.
   */
  forceUnlock(lockId: string): Promise<IActionResult> {
    return this.request({ action: 'force_unlock', lock: lockId });
  }

  /**
   * Answer a consent request: the operations approved on each path (none: deny).
   */
  answerConsent(
    consentId: string,
    approved: { path: string; operations: string[] }[],
    duration: number | null
  ): Promise<IActionResult> {
    return this.request({
      action: 'answer_consent',
      consent: consentId,
      approved: approved.map(a => ({
        path: a.path,
        operations: a.operations as any
      })),
      duration
    });
  }

  /**
   * Sign out of a connection's server: the kernel forgets its tokens and
   * closes the connection.
   */
  signOut(connectionId: string): Promise<IActionResult> {
    return this.request({ action: 'sign_out', connection: connectionId });
  }

  /**
   * Complete a waiting sign-in with the redirected address (its query, or the
   * whole URL). The address holds the authorization code: it is sent once and
   * kept nowhere.
   */
  respondToSignIn(signInId: string, address: string): Promise<IActionResult> {
    return this.request({
      action: 'sign_in_response',
      signIn: signInId,
      address
    });
  }

  /**
   * Cancel a tool call in flight: its cell raises `CallCancelled`.
   */
  cancelCall(callId: string): Promise<IActionResult> {
    return this.request({ action: 'cancel_call', call: callId });
  }

  /**
   * Send *action*; resolves with the kernel's result (never rejects).
   */
  request(action: Action): Promise<IActionResult> {
    const sink = this._sink;
    if (!sink || this._status !== 'ready') {
      return Promise.resolve(
        this._record({
          ok: false,
          message: 'The kernel has no file broker to act on.'
        })
      );
    }
    const id = `a${++this._actions}`;
    return new Promise<IActionResult>(resolve => {
      this._waiting.set(id, resolve);
      try {
        sink.post(actionMessage(id, action));
      } catch (error) {
        this._waiting.delete(id);
        resolve(
          this._record({ ok: false, message: `Could not send: ${error}` })
        );
      }
    });
  }

  // -- private ------------------------------------------------------------------------------

  private _apply(state: IBrokerState): void {
    const before = new Map(
      (this._state?.consents ?? []).map(c => [c.id, c] as const)
    );
    const now = new Set(state.consents.map(c => c.id));
    const added = state.consents.filter(c => !before.has(c.id));
    const outcomes = new Map(state.outcomes.map(o => [o.id, o] as const));
    const ended = [...before.keys()]
      .filter(id => !now.has(id))
      .map(id => ({ id, outcome: outcomes.get(id) ?? null }));
    this._state = state;
    this._appliedAt = Date.now();
    if (this._status !== 'ready') {
      this._status = 'ready';
      this._detail = '';
    }
    this._changed.emit();
    if (ended.length) {
      this._consentsEnded.emit(ended);
    }
    if (added.length) {
      this._consentsAdded.emit(added);
    }
  }

  private _settle(message: IResultMessage): void {
    const resolve = this._waiting.get(message.id);
    const result = this._record({ ok: message.ok, message: message.message });
    if (resolve) {
      this._waiting.delete(message.id);
      resolve(result);
    }
  }

  private _record(result: IActionResult): IActionResult {
    this._lastResult = result;
    this._changed.emit();
    return result;
  }

  private _forget(why: string): void {
    const pending = this._state?.consents ?? [];
    this._state = null;
    this._seq = -1;
    const waiting = [...this._waiting.values()];
    this._waiting.clear();
    for (const resolve of waiting) {
      resolve({ ok: false, message: `No answer from the kernel: ${why}.` });
    }
    if (pending.length) {
      this._consentsEnded.emit(pending.map(c => ({ id: c.id, outcome: null })));
    }
  }

  private _label: string;
  private _status: LinkStatus = 'idle';
  private _detail = '';
  private _state: IBrokerState | null = null;
  private _seq = -1;
  private _appliedAt = 0;
  private _kernelProtocol: number | null = null;
  private _lastResult: IActionResult | null = null;
  private _frontendSubshells: boolean | null = null;
  private _sink: IMessageSink | null = null;
  private _actions = 0;
  private _waiting = new Map<string, (result: IActionResult) => void>();
  private _changed = new Signal<this, void>(this);
  private _probeRequested = new Signal<this, string>(this);
  private _consentsAdded = new Signal<this, IConsent[]>(this);
  private _consentsEnded = new Signal<
    this,
    { id: string; outcome: IConsentOutcome | null }[]
  >(this);
}

/**
 * Connection states that no longer count as servers.
 */
export const ENDED = ['closing', 'closed', 'failed'];

/**
 * The model the views show: the broker of the current notebook's kernel.
 *
 * Re-emits `changed` when the current model changes or when it is replaced.
 */
export class FileBrokerModel {
  /**
   * The current notebook's broker model, or `null` when no notebook is current.
   */
  get current(): BrokerModel | null {
    return this._current;
  }
  set current(model: BrokerModel | null) {
    if (model === this._current) {
      return;
    }
    this._current?.changed.disconnect(this._forward, this);
    this._current = model;
    model?.changed.connect(this._forward, this);
    this._changed.emit();
  }

  /**
   * Emitted when the current model or anything it shows changed.
   */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /**
   * The status bar's words: "File broker: 2 servers · 1 lock", and
   * "· 1 signing in" while a server waits for its first sign-in.
   */
  get summary(): string {
    const model = this._current;
    if (!model) {
      return 'File broker';
    }
    switch (model.status) {
      case 'ready': {
        const waiting = model.signingIn;
        const signingIn = waiting > 0 ? ` · ${waiting} signing in` : '';
        return `File broker: ${plural(model.openConnections, 'server')}${signingIn} · ${plural(model.lockCount, 'lock')}`;
      }
      case 'not-loaded':
      case 'unloaded':
        return 'File broker: off';
      case 'mismatch':
        return 'File broker: version mismatch';
      default:
        return 'File broker';
    }
  }

  private _forward(): void {
    this._changed.emit();
  }

  private _current: BrokerModel | null = null;
  private _changed = new Signal<this, void>(this);
}

/**
 * `1 server`, `2 servers`.
 */
export function plural(count: number, word: string): string {
  return `${count} ${word}${count === 1 ? '' : 's'}`;
}
