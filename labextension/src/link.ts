/**
 * The link between one kernel and its `BrokerModel`: the panel protocol's comm.
 *
 * The link opens a comm to the kernel's `jupyter_fsbroker.panel` target
 * (on the comm target's subshell when the kernel and this frontend have them,
 * so that the kernel handles it while a cell blocks), feeds every message to
 * the model, and carries the model's actions. It follows the kernel through
 * restarts, and asks again the moment the kernel announces its broker on IOPub
 * (PROTOCOL.md, "The announcement"), while the cell that loaded it may still block,
 * and after a cell that mentions the extension ran (a kernel that does not
 * announce), so a `%load_ext` or `%reload_ext` is picked up without a reload of
 * the page. It decides nothing and shows nothing.
 */

import { Kernel, KernelMessage } from '@jupyterlab/services';
import { JSONObject } from '@lumino/coreutils';
import { IDisposable } from '@lumino/disposable';

import { BrokerModel } from './model';
import { hello, IPageOrigin } from './protocol';
import { ANNOUNCE_ID, COMM_TARGET } from './tokens';

/**
 * Code that may have loaded, reloaded or unloaded the extension.
 */
const MENTIONS_BROKER = /fsbroker/;

/**
 * One kernel's link.
 */
export class KernelLink implements IDisposable {
  /**
   * @param kernel - the kernel connection to follow.
   * @param model - the model to feed.
   * @param client - who we are, for the kernel's logs (`jupyterlab`, `notebook`).
   * @param page - where this page is, for the kernel's choice of a sign-in's redirect.
   */
  constructor(
    readonly kernel: Kernel.IKernelConnection,
    readonly model: BrokerModel,
    readonly client: string,
    readonly page?: IPageOrigin
  ) {
    kernel.statusChanged.connect(this._onStatus, this);
    kernel.iopubMessage.connect(this._onIOPub, this);
    void this.probe();
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  /**
   * Open (or re-open) the comm and ask for a snapshot. Safe to call at any time.
   */
  async probe(): Promise<void> {
    if (this._disposed) {
      return;
    }
    const kernel = this.kernel;
    if (kernel.isDisposed || kernel.status === 'dead') {
      this.model.setStatus('dead');
      return;
    }
    const attempt = ++this._attempts;
    this._closeComm();
    this.model.setStatus('connecting');
    try {
      await kernel.info;
    } catch (error) {
      if (attempt === this._attempts) {
        this.model.setStatus('idle', String(error));
      }
      return;
    }
    if (attempt !== this._attempts || this._disposed || kernel.isDisposed) {
      return;
    }
    const comm = kernel.createComm(COMM_TARGET);
    this._comm = comm;
    // Only a kernel and a frontend that both have subshells serve the comm while a cell blocks;
    // otherwise the subshell never starts and the comm stays on the main shell.
    const subshells =
      kernel.supportsSubshells && comm.commsOverSubshells !== 'disabled';
    this.model.frontendSubshells = subshells;
    const started = (comm as unknown as { subshellStarted?: Promise<void> })
      .subshellStarted;
    if (subshells && started) {
      try {
        await started;
      } catch (error) {
        console.warn('jupyter_fsbroker: no subshell for the panel', error);
        this.model.frontendSubshells = false;
      }
    }
    if (attempt !== this._attempts || comm.isDisposed) {
      return;
    }
    let opened = false;
    comm.onMsg = (msg: KernelMessage.ICommMsgMsg) => {
      if (comm === this._comm) {
        opened = true;
        this.model.setSink({ post: data => comm.send(data as JSONObject) });
        this.model.receive(msg.content.data);
      }
    };
    comm.onClose = (msg: KernelMessage.ICommCloseMsg) => {
      if (comm !== this._comm) {
        return;
      }
      this._comm = null;
      this.model.setSink(null);
      const data = msg.content.data as JSONObject | undefined;
      if (data && data.type === 'closing') {
        this.model.setStatus('unloaded', String(data.reason ?? ''));
      } else if (data && data.type === 'error') {
        this.model.receive(data);
      } else if (!opened) {
        // The kernel closes a comm whose target it does not know: no broker there.
        this.model.setStatus('not-loaded');
      } else {
        this.model.setStatus('unloaded', 'the kernel closed the panel');
      }
    };
    try {
      comm.open(hello(this.client, this.page) as JSONObject);
    } catch (error) {
      this.model.setStatus('idle', String(error));
    }
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    this.kernel.statusChanged.disconnect(this._onStatus, this);
    this.kernel.iopubMessage.disconnect(this._onIOPub, this);
    this._closeComm();
    this.model.setSink(null);
    this.model.setStatus('idle');
  }

  private _closeComm(): void {
    const comm = this._comm;
    this._comm = null;
    this.model.setSink(null);
    if (comm && !comm.isDisposed) {
      try {
        comm.close();
      } catch {
        comm.dispose(); // the kernel is gone: nothing to tell it
      }
    }
  }

  private _onStatus(
    kernel: Kernel.IKernelConnection,
    status: Kernel.Status
  ): void {
    if (status === 'restarting' || status === 'autorestarting') {
      this._restarting = true;
      this._attempts++;
      this._comm = null; // the new kernel process knows nothing of it
      this.model.setSink(null);
      this.model.setStatus('restarting');
    } else if (status === 'dead') {
      this._attempts++;
      this._comm = null;
      this.model.setSink(null);
      this.model.setStatus('dead');
    } else if (status === 'idle' && this._restarting) {
      this._restarting = false;
      void this.probe();
    }
  }

  private _onIOPub(
    kernel: Kernel.IKernelConnection,
    msg: KernelMessage.IIOPubMessage
  ): void {
    const type = msg.header.msg_type;
    if (type === 'update_display_data') {
      // The kernel announces its broker the moment the extension loads: open the comm now,
      // while the cell that loaded it may still block in a call.
      const transient = (msg.content as { transient?: { display_id?: string } })
        .transient;
      const status = this.model.status;
      if (
        transient?.display_id === ANNOUNCE_ID &&
        status !== 'ready' &&
        status !== 'connecting'
      ) {
        void this.probe();
      }
    } else if (type === 'execute_input') {
      const code = (msg as KernelMessage.IExecuteInputMsg).content.code;
      const parent = (msg.parent_header as KernelMessage.IHeader).msg_id;
      if (parent && MENTIONS_BROKER.test(code)) {
        this._watched.add(parent);
      }
    } else if (type === 'status') {
      const state = (msg as KernelMessage.IStatusMsg).content.execution_state;
      const parent = (msg.parent_header as KernelMessage.IHeader).msg_id;
      if (state === 'idle' && parent && this._watched.delete(parent)) {
        const status = this.model.status;
        if (status !== 'ready' && status !== 'connecting') {
          void this.probe();
        }
      }
    }
  }

  private _comm: Kernel.IComm | null = null;
  private _attempts = 0;
  private _restarting = false;
  private _disposed = false;
  private _watched = new Set<string>();
}
