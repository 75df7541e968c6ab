/**
 * The names other code relies on, in one place: the plugin ids, the command,
 * the comm target of the panel protocol, and the stable DOM ids and classes
 * that tests and users' CSS select (CONTRIBUTING.md lists them).
 *
 * A name changes here or nowhere: the kernel registers `COMM_TARGET`
 * (`jupyter_fsbroker/kernel/panel/messages.py`), the browser tests find the
 * views by these ids and classes.
 */

/** The plugins, as JupyterLab's settings and `disabledExtensions` name them. */
export const PLUGIN_IDS = {
  broker: 'jupyter_fsbroker:broker',
  sidebar: 'jupyter_fsbroker:sidebar',
  status: 'jupyter_fsbroker:status'
} as const;

/** The name of the token the broker plugin provides. */
export const BROKER_TOKEN = 'jupyter_fsbroker:IFileBroker';

/** The command that shows the sidebar. */
export const OPEN_COMMAND = 'fsbroker:open-sidebar';

/** The comm target the kernel extension registers at `%load_ext jupyter_fsbroker`. */
export const COMM_TARGET = 'jupyter_fsbroker.panel';

/** The display id of the kernel's announcement at `%load_ext jupyter_fsbroker` (never rendered). */
export const ANNOUNCE_ID = 'jupyter_fsbroker.announce';

/** The sidebar's DOM id (also the id `app.shell.activateById` takes). */
export const SIDEBAR_ID = 'fsbroker-sidebar';

/** The status item's DOM id. */
export const STATUS_ID = 'fsbroker-status';

/** The consent dialog's DOM id and class. */
export const DIALOG_ID = 'fsbroker-consent-dialog';

/** The consent dialog's buttons. */
export const APPROVE_CLASS = 'fsbroker-dialog-approve';
export const DENY_CLASS = 'fsbroker-dialog-deny';

/** The sidebar's buttons: the kill switch, Revoke and Force release. */
export const SIDEBAR_BUTTONS = {
  disconnect: 'fsbroker-sidebar-disconnect',
  revoke: 'fsbroker-sidebar-revoke',
  forceUnlock: 'fsbroker-sidebar-force-unlock',
  signOut: 'fsbroker-signout',
  cancelCall: 'fsbroker-sidebar-cancel-call'
} as const;

/** The sidebar's sign-in line of a connection, and its "Open sign-in page" link. */
export const SIGN_IN_CLASSES = {
  status: 'fsbroker-sidebar-signin',
  open: 'fsbroker-sidebar-signin-open'
} as const;
