/**
 * The panel protocol between a kernel's file broker and this extension.
 *
 * `PROTOCOL.md` beside `package.json` is the contract; this module is its
 * TypeScript mirror (the kernel's mirror is `jupyter_fsbroker/kernel/panel/messages.py`).
 * It only describes and checks messages: it never talks to a kernel.
 */

/**
 * The protocol version this extension speaks; every message carries one.
 */
export const PROTOCOL_VERSION = 1;

/**
 * The kernel's announcement at `%load_ext jupyter_fsbroker` (PROTOCOL.md, "The
 * announcement"): an IOPub `update_display_data` with `transient.display_id`
 * `jupyter_fsbroker.announce` (`ANNOUNCE_ID` in `tokens.ts`), published from the
 * cell that loads the extension. Pages read IOPub while that cell still runs, so a
 * panel opens its comm then, not once the cell ends. Its data, under this MIME
 * type, is `{version, type: 'announce', target}`; the display is never shown, so
 * nothing renders it.
 */
export const ANNOUNCE_MIME = 'application/vnd.jupyter-fsbroker.announce+json';

/**
 * The id prefix of a connection entry that stands for a first sign-in: the
 * server is not connected yet (its state is `connecting`).
 */
export const SIGNING_IN = 'signing-in:';

/**
 * The four operations a grant can give.
 */
export type Operation = 'read' | 'write' | 'delete' | 'watch';

/**
 * A shared folder.
 */
export interface IRoot {
  name: string;
  path: string;
  readOnly: boolean;
}

/**
 * A server connection of the notebook.
 */
export interface IConnection {
  id: string;
  name: string;
  serverName: string;
  transport: string;
  target: string;
  state: string;
  closeReason: string | null;
  protocolVersion: string | null;
  /**
   * The era of MCP the connection speaks: `modern` (2026-07-28, files in
   * batches) or `legacy` (the handshake era); absent from an older kernel.
   */
  era?: 'modern' | 'legacy' | null;
  /**
   * Whether the server runs confined by the broker; absent or `null` while
   * the kernel cannot tell.
   */
  confined?: boolean | null;
  /**
   * How the connection stands with its authorization server: `null` for a
   * connection without sign-in settings, absent from an older kernel.
   */
  auth?: IAuthState | null;
}

/**
 * Where the authorization server's redirect of a sign-in comes back:
 * the kernel's loopback listener, this extension's callback page, or a
 * person pasting the address into the sign-in card.
 */
export type SignInReceiver = 'loopback' | 'page' | 'paste';

/**
 * A sign-in waiting for the person. `url` is the authorization URL (it holds
 * `state` and the PKCE challenge, never a code or a token).
 */
export interface ISignInStep {
  id: string;
  url: string;
  receiver: SignInReceiver;
}

/**
 * A connection's sign-in state; never a token, code or secret.
 */
export interface IAuthState {
  status: 'signed_out' | 'waiting' | 'signed_in' | 'failed';
  issuer: string | null;
  resource: string;
  expiresAt: string | null;
  /** What failed (a sign-in error kind: `state_mismatch`, `timed_out` …). */
  error: string | null;
  signIn: ISignInStep | null;
}

/**
 * A live grant: of one connection, or a pre-approval (`connectionId` null).
 */
export interface IGrant {
  id: string;
  connectionId: string | null;
  server: string;
  path: string;
  operations: Operation[];
  expiresAt: string | null;
  source: string;
}

/**
 * A kept lock (`keepLocked`), which the user may force-release.
 */
export interface ILock {
  id: string;
  path: string;
  connectionId: string;
  server: string;
  mode: string;
  since: string;
}

/**
 * One requested path of a consent request.
 */
export interface IConsentItem {
  path: string;
  rel: string | null;
  approvable: boolean;
  reason: string | null;
  readOnly: boolean;
  /** The operations asked for this path. */
  operations: Operation[];
  /** The operations that can be granted on it (no write or delete in a read-only root). */
  grantable: Operation[];
  /** The operations that can destroy data here (delete; write over an existing file): marked. */
  destructive?: Operation[];
  /** The operations a prompt starts ticked: grantable and not destructive. */
  ticked?: Operation[];
  /** `folder`, `file`, `missing` (a write creates it), `other` or `''` (unknown). */
  kind?: string;
  /** The path is a shared folder itself. */
  wholeRoot?: boolean;
  /** Its real location on the kernel's computer (shown on hover). */
  location?: string;
  /** What granting it covers, in words (`the whole shared folder: 1,204 files, subfolders included`). */
  covers?: string;
  /** What an operation would do, where it says more than its name (`write`: `replaces a 12 kB file`). */
  effects?: Partial<Record<Operation, string>>;
}

/**
 * Who asks for consent: the server's own name, where it runs, whether it is sandboxed.
 */
export interface IConsentAsker {
  title: string;
  place: 'local' | 'remote' | '';
  host: string;
  sandboxed: boolean | null;
  /** All of it in one line, as the cell's prompt says it. */
  text: string;
}

/**
 * A consent request waiting for an answer.
 */
export interface IConsent {
  id: string;
  server: string;
  connectionId: string;
  message: string;
  operations: Operation[];
  items: IConsentItem[];
  /** Paths approved at once because live grants already cover them. */
  already: string[];
  createdAt: string;
  deadline: string;
  /** Who asks (absent from kernels before it was sent). */
  asker?: IConsentAsker;
  /** The label of the duration that lasts the connection (`until you disconnect analysis`). */
  untilDisconnect?: string;
}

/**
 * How a consent request ended, in the words the notebook's prompt uses.
 */
export interface IConsentOutcome {
  id: string;
  server: string;
  outcome: 'approved' | 'denied' | 'timeout' | 'withdrawn';
  text: string;
  /** `panel` when this extension's answer counted; `notebook` for the cell's prompt, `broker` for a timeout. */
  answeredBy: 'panel' | 'notebook' | 'broker';
  at: string;
}

/**
 * A change the servers were told about (`notifications/files/changed`).
 */
export interface IChange {
  at: string;
  server: string;
  path: string;
  event: string;
  oldPath: string | null;
}

/**
 * The colour of an outcome: green let through, grey nothing decided against
 * the server, red refused.
 */
export type Tone = 'green' | 'grey' | 'red';

/**
 * How a request ended, in the words every view of the broker uses.
 */
export interface IOutcome {
  /** `allowed`, `asked for consent`, `not granted yet`, `withdrawn`, `timed out`, `failed`, `refused`. */
  word: string;
  tone: Tone;
}

/**
 * One `files/*` request, from the audit log.
 */
export interface IActivity {
  at: string;
  server: string;
  method: string;
  path: string | null;
  decision: 'allow' | 'deny';
  error: string | null;
  reason: string | null;
  bytes: number;
  /** Why a grant was missing or a consent granted nothing, when known. */
  cause?: string;
  /** How it ended (a kernel before this field sends none). */
  outcome?: IOutcome;
}

/**
 * Whether the panel's messages can be handled while a cell runs.
 */
export interface ISubshells {
  /** The kernel can run comm handlers on subshells. */
  supported: boolean;
  /** The last message of this panel was handled on a subshell (so a blocked cell did not hold it up). */
  used: boolean;
}

/**
 * A tool call in flight, which the panel can cancel (`cancel_call`).
 */
export interface ICall {
  id: string;
  connectionId: string;
  /** The connection's name in the notebook. */
  server: string;
  tool: string;
  startedAt: string;
  /** Seconds it had run when the kernel took the snapshot (the panel counts on from there). */
  elapsed: number;
}

/**
 * Everything the panel shows about one kernel's broker.
 */
export interface IBrokerState {
  packageVersion: string;
  closed: boolean;
  roots: IRoot[];
  connections: IConnection[];
  grants: IGrant[];
  locks: ILock[];
  consents: IConsent[];
  outcomes: IConsentOutcome[];
  changes: IChange[];
  activity: IActivity[];
  subshells: ISubshells;
  /** The tool calls in flight, oldest first (absent from an older kernel). */
  calls?: ICall[];
}

/**
 * The approval of one path: the operations granted on it.
 */
export interface IApproval {
  path: string;
  operations: Operation[];
}

/**
 * What the panel can ask the kernel to do.
 */
export type Action =
  | { action: 'disconnect'; connection: string }
  | { action: 'revoke'; grant: string }
  | { action: 'force_unlock'; lock: string }
  | {
      action: 'answer_consent';
      consent: string;
      approved: IApproval[];
      duration: number | null;
    }
  | { action: 'sign_out'; connection: string }
  | { action: 'sign_in_response'; signIn: string; address: string }
  | { action: 'cancel_call'; call: string };

/**
 * Messages from the kernel.
 */
export interface ISnapshotMessage {
  version: number;
  type: 'snapshot';
  seq: number;
  state: IBrokerState;
}

export interface IResultMessage {
  version: number;
  type: 'result';
  id: string;
  ok: boolean;
  message: string;
}

export interface IErrorMessage {
  version: number;
  type: 'error';
  code: string;
  message: string;
  supported?: number[];
}

export interface IClosingMessage {
  version: number;
  type: 'closing';
  reason: string;
}

/**
 * The kernel asks whether this page's browser reaches its `127.0.0.1` (an
 * SSH tunnel makes a loopback page with a remote kernel): fetch `url`.
 */
export interface IProbeMessage {
  version: number;
  type: 'probe';
  url: string;
}

export type KernelMessage =
  | ISnapshotMessage
  | IResultMessage
  | IErrorMessage
  | IClosingMessage
  | IProbeMessage;

/**
 * Where this page is, for the kernel's choice of a sign-in's redirect.
 */
export interface IPageOrigin {
  /** The page's `location.origin`. */
  origin: string;
  /** JupyterLab's base URL path (`/`, `/user/ada/`): always ends with `/`. */
  baseUrl: string;
  /** Whether this extension serves `oauth-callback.html` there and relays its redirects. */
  callbackPage: boolean;
}

/**
 * The first message: the comm's `comm_open` data.
 */
export function hello(
  client: string,
  page?: IPageOrigin
): Record<string, unknown> {
  return { version: PROTOCOL_VERSION, type: 'hello', client, ...page };
}

/**
 * A request for a fresh snapshot.
 */
export function refresh(): Record<string, unknown> {
  return { version: PROTOCOL_VERSION, type: 'refresh' };
}

/**
 * An action message with its id.
 */
export function actionMessage(
  id: string,
  action: Action
): Record<string, unknown> {
  return { version: PROTOCOL_VERSION, type: 'action', id, ...action };
}

/**
 * What a kernel message is, once checked.
 */
export type Parsed =
  | { kind: 'message'; message: KernelMessage }
  | { kind: 'version'; version: number | null }
  | { kind: 'invalid'; why: string };

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const TYPES = ['snapshot', 'result', 'error', 'closing', 'probe'];

/**
 * Check a message from the kernel: its version first, then its shape.
 */
export function parse(data: unknown): Parsed {
  if (!isObject(data)) {
    return { kind: 'invalid', why: 'not an object' };
  }
  const version = data.version;
  if (typeof version !== 'number') {
    return { kind: 'version', version: null };
  }
  if (version !== PROTOCOL_VERSION) {
    // A kernel that speaks another version says so in an error message we can read.
    return { kind: 'version', version };
  }
  if (typeof data.type !== 'string' || !TYPES.includes(data.type)) {
    return {
      kind: 'invalid',
      why: `unknown message type ${String(data.type)}`
    };
  }
  if (data.type === 'snapshot' && !isObject(data.state)) {
    return { kind: 'invalid', why: 'a snapshot without state' };
  }
  if (data.type === 'probe' && typeof data.url !== 'string') {
    return { kind: 'invalid', why: 'a probe without url' };
  }
  return { kind: 'message', message: data as unknown as KernelMessage };
}
