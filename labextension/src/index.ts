/**
 * jupyter_fsbroker's JupyterLab and Notebook 7 extension: its plugins.
 *
 * - `jupyter_fsbroker:broker` links the kernels of the open notebooks and
 *   provides the model of the current one (`IFileBroker`), and shows consent
 *   requests as dialogs.
 * - `jupyter_fsbroker:sidebar` adds the "File Broker" sidebar on the right,
 *   and a command that opens it.
 * - `jupyter_fsbroker:status` adds the status bar item (in Notebook 7, which
 *   has no status bar, the item goes to the top bar).
 */

import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { PageConfig } from '@jupyterlab/coreutils';
import { INotebookTracker } from '@jupyterlab/notebook';
import { IStatusBar } from '@jupyterlab/statusbar';
import { Token } from '@lumino/coreutils';

// The links, the sidebar and the status item exist from the start (a kernel's state must be
// shown as soon as its notebook opens), so activation needs these modules at once.
/* eslint-disable jupyter/prefer-lazy-imports */
import { ConsentDialogs } from './consent';
import { NotebookFollower } from './follow';
import { FileBrokerModel } from './model';
import { FileBrokerSidebar } from './sidebar';
import { pageOrigin, probeLoopback, SignInRelay } from './signin';
import { FileBrokerStatus } from './status';
/* eslint-enable jupyter/prefer-lazy-imports */
import { BROKER_TOKEN, OPEN_COMMAND, PLUGIN_IDS, SIDEBAR_ID } from './tokens';

export * from './model';
export * from './protocol';
export * from './signin';
export * from './tokens';

/**
 * What the broker plugin provides to the views.
 */
export interface IFileBroker {
  /** The current notebook's broker. */
  readonly model: FileBrokerModel;
  /** The kernels linked, and which one is current. */
  readonly follower: NotebookFollower;
  /** The consent dialogs. */
  readonly dialogs: ConsentDialogs;
}

/**
 * The token of the broker plugin.
 */
export const IFileBroker = new Token<IFileBroker>(
  BROKER_TOKEN,
  'The file broker of the current notebook’s kernel, and its consent dialogs.'
);

const broker: JupyterFrontEndPlugin<IFileBroker> = {
  id: PLUGIN_IDS.broker,
  description:
    'Links the kernels of the open notebooks to the panel protocol and shows consent requests as dialogs.',
  autoStart: true,
  requires: [INotebookTracker],
  provides: IFileBroker,
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker): IFileBroker => {
    const model = new FileBrokerModel();
    const client = app.name.toLowerCase().includes('notebook')
      ? 'notebook'
      : 'jupyterlab';
    const page = pageOrigin(
      window.location.origin,
      PageConfig.getOption('baseUrl') || '/',
      PageConfig.getOption('fullLabextensionsUrl')
    );
    const follower = new NotebookFollower(tracker, model, client, page);
    const dialogs = new ConsentDialogs();
    const probe = (_: unknown, url: string) =>
      probeLoopback(url, window.location.origin);
    follower.modelAdded.connect((_, added) => {
      dialogs.watch(added);
      added.probeRequested.connect(probe);
    });
    follower.models.forEach(existing => {
      dialogs.watch(existing);
      existing.probeRequested.connect(probe);
    });
    // The callback page's redirects go to the kernel of this tab that waits for them.
    const relay = new SignInRelay(() => follower.models);
    // Without this, a kernel would keep sending snapshots to the comms of a page that was closed.
    window.addEventListener('pagehide', () => {
      relay.dispose();
      follower.dispose();
    });
    return { model, follower, dialogs };
  }
};

const sidebar: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_IDS.sidebar,
  description:
    'The File Broker sidebar: servers, grants, locks and the activity of the current kernel.',
  autoStart: true,
  requires: [IFileBroker],
  optional: [ILayoutRestorer, ICommandPalette],
  activate: (
    app: JupyterFrontEnd,
    fileBroker: IFileBroker,
    restorer: ILayoutRestorer | null,
    palette: ICommandPalette | null
  ): void => {
    const widget = new FileBrokerSidebar({
      model: fileBroker.model,
      retry: () => fileBroker.follower.retry(),
      answer: (model, consent) => fileBroker.dialogs.open(model, consent)
    });
    app.shell.add(widget, 'right', { rank: 900 });
    restorer?.add(widget, SIDEBAR_ID);
    app.commands.addCommand(OPEN_COMMAND, {
      label: 'Show File Broker',
      caption: 'Show the File Broker sidebar of the current notebook',
      describedBy: { args: { type: 'object', properties: {} } },
      execute: () => app.shell.activateById(SIDEBAR_ID)
    });
    palette?.addItem({ command: OPEN_COMMAND, category: 'File Broker' });
  }
};

const status: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_IDS.status,
  description:
    'A status bar item counting the servers and locks of the current kernel.',
  autoStart: true,
  requires: [IFileBroker],
  optional: [IStatusBar],
  activate: (
    app: JupyterFrontEnd,
    fileBroker: IFileBroker,
    statusBar: IStatusBar | null
  ): void => {
    const item = new FileBrokerStatus(fileBroker.model, () => {
      void app.commands.execute(OPEN_COMMAND);
    });
    // Shown while a notebook is current (not on Notebook 7's file browser page, say).
    const active = () => fileBroker.model.current !== null;
    if (statusBar) {
      statusBar.registerStatusItem(PLUGIN_IDS.status, {
        item,
        align: 'left',
        rank: 100,
        isActive: active,
        activeStateChanged: fileBroker.model.changed
      });
    } else {
      // Notebook 7 has no status bar: the item sits in the top bar instead.
      item.addClass('fsbroker-status-top');
      app.shell.add(item, 'top', { rank: 900 });
      const follow = () => item.setHidden(!active());
      fileBroker.model.changed.connect(follow);
      follow();
    }
  }
};

const plugins: JupyterFrontEndPlugin<any>[] = [broker, sidebar, status];

export default plugins;
