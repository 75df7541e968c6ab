/**
 * The "File Broker" sidebar: the current notebook's broker, live, with its kill switches.
 *
 * A view of the `FileBrokerModel`: shared folders, connections (Disconnect),
 * grants (Revoke), kept locks (Force release), consent requests waiting, the
 * change feed and the activity log; when the kernel has no broker, how to
 * start one. Its buttons only call the model's actions; it decides nothing.
 */

import {
  Button,
  caretDownIcon,
  caretRightIcon,
  LabIcon,
  ReactWidget,
  UseSignal
} from '@jupyterlab/ui-components';
import React from 'react';

import { activityRows, clockTime } from './activity';
import { BrokerModel, ENDED, FileBrokerModel, plural } from './model';
import { IAuthState, IBrokerState, ICall, IConsent } from './protocol';
import { signInWords } from './signin';

import { SIDEBAR_BUTTONS, SIDEBAR_ID, SIGN_IN_CLASSES } from './tokens';

const FOLDER_SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="16" viewBox="0 0 24 24">
  <path class="jp-icon3" fill="#616161" d="M10 4H4c-1.1 0-2 .9-2 2v12c0 1.1.9 2 2 2h8.1a6.5 6.5 0 0 1-.1-1c0-3.3 2.5-6.1 5.8-6.5V8c0-1.1-.9-2-2-2h-5.8L10 4z"/>
  <path class="jp-icon3" fill="#616161" d="M21 15v-1.5a2.5 2.5 0 0 0-5 0V15h-.5a.5.5 0 0 0-.5.5v5c0 .3.2.5.5.5h6c.3 0 .5-.2.5-.5v-5a.5.5 0 0 0-.5-.5H21zm-1 0h-3v-1.5a1.5 1.5 0 0 1 3 0V15z"/>
</svg>`;

/**
 * The extension's icon: a folder with a padlock.
 */
export const fileBrokerIcon = new LabIcon({
  name: 'jupyter_fsbroker:icon',
  svgstr: FOLDER_SVG
});

/**
 * What the sidebar needs besides the model.
 */
export interface ISidebarOptions {
  model: FileBrokerModel;
  /** Ask the current kernel again ("Check again"). */
  retry: () => void;
  /** Open the dialog of a waiting consent request. */
  answer: (model: BrokerModel, consent: IConsent) => void;
}

/**
 * The sidebar widget.
 */
export class FileBrokerSidebar extends ReactWidget {
  constructor(private readonly _options: ISidebarOptions) {
    super();
    this.id = SIDEBAR_ID;
    this.addClass('fsbroker-sidebar');
    this.title.icon = fileBrokerIcon;
    this.title.caption = 'File Broker';
  }

  render(): JSX.Element {
    const { model } = this._options;
    return (
      <UseSignal signal={model.changed}>
        {() => <SidebarBody {...this._options} />}
      </UseSignal>
    );
  }
}

function SidebarBody(props: ISidebarOptions): JSX.Element {
  const current = props.model.current;
  return (
    <div className="fsbroker-sidebar-body">
      <header className="fsbroker-sidebar-header">
        <h2>File Broker</h2>
        <div className="fsbroker-sidebar-kernel">
          {current ? current.label || 'this notebook' : 'no notebook'}
        </div>
      </header>
      {current ? (
        <KernelView
          broker={current}
          retry={props.retry}
          answer={props.answer}
        />
      ) : (
        <Notice kind="info">
          Open a notebook: this panel shows what the servers connected to its
          kernel can touch.
        </Notice>
      )}
    </div>
  );
}

function Notice(props: {
  kind: 'info' | 'warn' | 'error';
  children: React.ReactNode;
}): JSX.Element {
  return (
    <div className={`fsbroker-notice fsbroker-notice-${props.kind}`}>
      {props.children}
    </div>
  );
}

interface IKernelViewProps {
  broker: BrokerModel;
  retry: () => void;
  answer: (model: BrokerModel, consent: IConsent) => void;
}

function KernelView(props: IKernelViewProps): JSX.Element {
  const model = props.broker;
  const retry = (
    <Button small className="fsbroker-sidebar-retry" onClick={props.retry}>
      Check again
    </Button>
  );
  switch (model.status) {
    case 'idle':
    case 'connecting':
      return <Notice kind="info">Asking the kernel…</Notice>;
    case 'restarting':
      return <Notice kind="info">The kernel is restarting…</Notice>;
    case 'dead':
      return <Notice kind="warn">The kernel is not running.</Notice>;
    case 'not-loaded':
      return (
        <div className="fsbroker-empty">
          <p>This kernel has no file broker. Start one in a cell:</p>
          <pre className="fsbroker-code">%load_ext jupyter_fsbroker</pre>
          <p>
            Then share folders and connect servers; they appear here with their
            grants and locks.
          </p>
          {retry}
        </div>
      );
    case 'unloaded':
      return (
        <div className="fsbroker-empty">
          <p>
            The kernel's file broker was closed
            {model.detail ? ` (${model.detail})` : ''}.
          </p>
          <pre className="fsbroker-code">%load_ext jupyter_fsbroker</pre>
          {retry}
        </div>
      );
    case 'mismatch':
      return (
        <Notice kind="error">
          <p>
            This panel and the kernel's jupyter_fsbroker do not speak the same
            panel protocol ({model.detail}).
          </p>
          <p>
            Install the same jupyter_fsbroker in the kernel's environment and in
            JupyterLab's, then restart the kernel and reload the page.
          </p>
        </Notice>
      );
    case 'ready':
      return model.state ? (
        <StateView {...props} state={model.state} />
      ) : (
        <Notice kind="info">Asking the kernel…</Notice>
      );
  }
  return <Notice kind="info">Asking the kernel…</Notice>;
}

function Section(props: {
  title: string;
  count?: number;
  name: string;
  children: React.ReactNode;
  startOpen?: boolean;
}): JSX.Element {
  // Until the user toggles it, a section is open when it has something to show.
  const [chosen, setOpen] = React.useState<boolean | null>(null);
  const open = chosen ?? props.startOpen ?? true;
  const Caret = open ? caretDownIcon : caretRightIcon;
  return (
    <section className={`fsbroker-section fsbroker-section-${props.name}`}>
      <button
        className="fsbroker-section-title"
        aria-expanded={open}
        onClick={() => setOpen(!open)}
      >
        <Caret.react tag="span" className="fsbroker-caret" />
        <span>{props.title}</span>
        {props.count !== undefined && (
          <span className="fsbroker-count">{props.count}</span>
        )}
      </button>
      {open && <div className="fsbroker-section-body">{props.children}</div>}
    </section>
  );
}

function Empty(props: { children: React.ReactNode }): JSX.Element {
  return <div className="fsbroker-muted">{props.children}</div>;
}

function SignInLine(props: { auth: IAuthState }): JSX.Element {
  const { auth } = props;
  const failed = auth.status === 'failed';
  return (
    <div
      className={`${SIGN_IN_CLASSES.status} fsbroker-signin-${auth.status} ${failed ? 'fsbroker-denied' : 'fsbroker-muted'}`}
    >
      {signInWords(auth, time)}
      {auth.status === 'waiting' && auth.signIn && (
        <>
          {' · '}
          <a
            className={SIGN_IN_CLASSES.open}
            href={auth.signIn.url}
            target="_blank"
            rel="noopener noreferrer"
          >
            Open sign-in page
          </a>
        </>
      )}
    </div>
  );
}

/** Every time in the sidebar is on the one 24-hour clock the kernel's views use. */
const time = clockTime;

function StateView(
  props: IKernelViewProps & { state: IBrokerState }
): JSX.Element {
  const { broker: model, state } = props;
  const [busy, setBusy] = React.useState<Set<string>>(new Set());
  const act = (key: string, run: () => Promise<unknown>) => {
    setBusy(old => new Set(old).add(key));
    void run().finally(() =>
      setBusy(old => {
        const next = new Set(old);
        next.delete(key);
        return next;
      })
    );
  };
  const servers = new Map(state.connections.map(c => [c.id, c.name] as const));
  const open = model.openConnections;
  return (
    <div className="fsbroker-state">
      <div className="fsbroker-summary">
        {plural(open, 'server')} · {plural(state.grants.length, 'grant')} ·{' '}
        {plural(state.locks.length, 'lock')}
        {state.consents.length > 0 && (
          <span className="fsbroker-badge">
            {plural(state.consents.length, 'request')} waiting
          </span>
        )}
      </div>
      {model.actionsMayWait && (
        <Notice kind="warn">
          {state.subshells.supported
            ? 'This frontend does not send the panel’s messages on a kernel subshell: '
            : 'This kernel cannot run the panel’s actions on a subshell: '}
          Disconnect, Revoke and consent answers wait until the running cell
          ends.
        </Notice>
      )}
      {model.lastResult && (
        <div
          className={`fsbroker-message ${model.lastResult.ok ? '' : 'fsbroker-message-error'}`}
        >
          {model.lastResult.message}
        </div>
      )}
      {state.consents.length > 0 && (
        <Section
          title="Waiting for you"
          name="consents"
          count={state.consents.length}
        >
          {state.consents.map(consent => (
            <div className="fsbroker-row" key={consent.id}>
              <div className="fsbroker-row-text">
                <b>{consent.server}</b> asks for{' '}
                {consent.items.map(item => item.rel ?? item.path).join(', ')}
              </div>
              <Button
                small
                className="fsbroker-sidebar-answer jp-mod-accept"
                onClick={() => props.answer(model, consent)}
              >
                Answer…
              </Button>
            </div>
          ))}
        </Section>
      )}
      <RunningSection broker={model} />
      <Section
        title="Connections"
        name="connections"
        count={state.connections.length}
      >
        {state.connections.length === 0 && (
          <Empty>
            No connections. Connect with broker.connect(...) or %fsbroker
            connect.
          </Empty>
        )}
        {state.connections.map(conn => {
          const ended = ENDED.includes(conn.state);
          const key = `disconnect:${conn.id}`;
          return (
            <div className="fsbroker-row fsbroker-connection" key={conn.id}>
              <div className="fsbroker-row-text">
                <b className="fsbroker-wrap">{conn.name}</b>{' '}
                <span className="fsbroker-muted">
                  {conn.transport} · {conn.state}
                  {conn.era === 'modern' ? ' · 2026-07-28 era' : ''}
                  {conn.confined ? ' · confined' : ''}
                </span>
                {conn.serverName && (
                  <div
                    className="fsbroker-server-name fsbroker-wrap"
                    title={conn.serverName}
                  >
                    {conn.serverName}
                  </div>
                )}
                <div
                  className="fsbroker-muted fsbroker-ellipsis"
                  title={conn.target}
                >
                  {conn.target}
                </div>
                {conn.closeReason && (
                  <div className="fsbroker-muted">{conn.closeReason}</div>
                )}
                {conn.auth && <SignInLine auth={conn.auth} />}
              </div>
              <div className="fsbroker-row-buttons">
                <Button
                  small
                  className={`${SIDEBAR_BUTTONS.disconnect} jp-mod-styled jp-mod-warn`}
                  disabled={ended || busy.has(key)}
                  title="End this connection now: its grants, locks and watches end with it"
                  onClick={() => act(key, () => model.disconnect(conn.id))}
                >
                  Disconnect
                </Button>
                {conn.auth && (
                  <Button
                    small
                    className={SIDEBAR_BUTTONS.signOut}
                    disabled={
                      conn.auth.status === 'signed_out' ||
                      busy.has(`signout:${conn.id}`)
                    }
                    title="Forget this server's sign-in and close the connection: the next connect asks again"
                    onClick={() =>
                      act(`signout:${conn.id}`, () => model.signOut(conn.id))
                    }
                  >
                    Sign out
                  </Button>
                )}
              </div>
            </div>
          );
        })}
      </Section>
      <Section title="Grants" name="grants" count={state.grants.length}>
        {state.grants.length === 0 && (
          <Empty>
            No grants: servers ask with consent, or pre-approve with %fsbroker
            allow.
          </Empty>
        )}
        {state.grants.map(grant => {
          const key = `revoke:${grant.id}`;
          const holder = grant.connectionId
            ? (servers.get(grant.connectionId) ?? grant.server)
            : 'every server';
          return (
            <div className="fsbroker-row fsbroker-grant" key={grant.id}>
              <div className="fsbroker-row-text">
                <code>{grant.path}</code>{' '}
                <span className="fsbroker-ops">
                  {grant.operations.join(', ')}
                </span>
                <div className="fsbroker-muted">
                  {holder}
                  {grant.expiresAt ? ` · until ${time(grant.expiresAt)}` : ''}
                </div>
              </div>
              <Button
                small
                className={SIDEBAR_BUTTONS.revoke}
                disabled={busy.has(key)}
                title="Revoke this grant now"
                onClick={() => act(key, () => model.revoke(grant.id))}
              >
                Revoke
              </Button>
            </div>
          );
        })}
      </Section>
      <Section title="Locks" name="locks" count={state.locks.length}>
        {state.locks.length === 0 && <Empty>No kept locks.</Empty>}
        {state.locks.map(lock => {
          const key = `unlock:${lock.id}`;
          return (
            <div className="fsbroker-row fsbroker-lock" key={lock.id}>
              <div className="fsbroker-row-text">
                <code>{lock.path}</code>
                <div className="fsbroker-muted">
                  {lock.server} · {lock.mode} · since {time(lock.since)}
                </div>
              </div>
              <Button
                small
                className={SIDEBAR_BUTTONS.forceUnlock}
                disabled={busy.has(key)}
                title="Release this lock now, whoever holds it"
                onClick={() => act(key, () => model.forceUnlock(lock.id))}
              >
                Force release
              </Button>
            </div>
          );
        })}
      </Section>
      <Section title="Shared folders" name="roots" count={state.roots.length}>
        {state.roots.length === 0 && (
          <Empty>No shared folders: %fsbroker root ./data shares one.</Empty>
        )}
        {state.roots.map(root => (
          <div className="fsbroker-row" key={root.name}>
            <div className="fsbroker-row-text">
              <b>{root.name}</b>
              {root.readOnly ? (
                <span className="fsbroker-muted"> · read-only</span>
              ) : null}
              <div
                className="fsbroker-muted fsbroker-ellipsis"
                title={root.path}
              >
                {root.path}
              </div>
            </div>
          </div>
        ))}
      </Section>
      <Section
        title="Changes"
        name="changes"
        count={state.changes.length}
        startOpen={state.changes.length > 0}
      >
        {state.changes.length === 0 && (
          <Empty>No changes sent to servers.</Empty>
        )}
        <ul className="fsbroker-feed fsbroker-sidebar-changes">
          {[...state.changes].reverse().map((change, index) => (
            <li key={index}>
              <span className="fsbroker-muted">{time(change.at)}</span>{' '}
              {change.event} <code>{change.path}</code> → {change.server}
            </li>
          ))}
        </ul>
      </Section>
      <Section
        title="Activity"
        name="activity"
        count={state.activity.length}
        startOpen={state.activity.length > 0}
      >
        {state.activity.length === 0 && <Empty>No requests yet.</Empty>}
        <ul className="fsbroker-feed fsbroker-sidebar-activity">
          {activityRows(state.activity).map((row, index) => (
            <li key={index} className={row.className} title={row.detail}>
              <span className="fsbroker-muted">{row.time}</span> {row.server}{' '}
              {row.method} {row.path ? <code>{row.path}</code> : null}{' '}
              <span className="fsbroker-outcome">{row.word}</span>
            </li>
          ))}
        </ul>
      </Section>
      <div className="fsbroker-footer fsbroker-muted">
        jupyter_fsbroker {state.packageVersion} in the kernel
      </div>
    </div>
  );
}

/**
 * The tool calls in flight, each with its seconds (ticking) and Cancel; shown
 * only while there are some.
 */
function RunningSection(props: { broker: BrokerModel }): JSX.Element | null {
  const model = props.broker;
  const calls = model.runningCalls;
  const [, setNow] = React.useState(Date.now());
  const [cancelling, setCancelling] = React.useState<Set<string>>(new Set());
  React.useEffect(() => {
    if (calls.length === 0) {
      return;
    }
    const timer = window.setInterval(() => setNow(Date.now()), 1000);
    return () => window.clearInterval(timer);
  }, [calls.length > 0]);
  if (calls.length === 0) {
    return null;
  }
  const cancel = (call: ICall) => {
    setCancelling(old => new Set(old).add(call.id));
    void model.cancelCall(call.id);
  };
  return (
    <Section title="Running" name="running" count={calls.length}>
      {calls.map(call => (
        <div className="fsbroker-row fsbroker-running-call" key={call.id}>
          <div className="fsbroker-row-text">
            <b>{call.server}</b> · {call.tool}{' '}
            <span className="fsbroker-muted fsbroker-running-seconds">
              · {model.callSeconds(call)} s
              {cancelling.has(call.id) ? ' · cancelling…' : ''}
            </span>
          </div>
          <Button
            small
            className={SIDEBAR_BUTTONS.cancelCall}
            disabled={cancelling.has(call.id)}
            title="Cancel this call: the server is told to stop, and its cell says it was cancelled"
            onClick={() => cancel(call)}
          >
            Cancel
          </Button>
        </div>
      ))}
    </Section>
  );
}
