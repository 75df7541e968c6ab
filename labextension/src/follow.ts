/**
 * Which kernels the panel links to, and which one is current.
 *
 * `NotebookFollower` links every kernel of an open notebook (one link per
 * kernel, however many notebooks share it), follows kernel changes and
 * shutdowns, and points the `FileBrokerModel` at the current notebook's
 * kernel. It never acts on a kernel beyond opening and closing the links.
 */

import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { Kernel } from '@jupyterlab/services';
import { ISignal, Signal } from '@lumino/signaling';

import { KernelLink } from './link';
import { BrokerModel, FileBrokerModel } from './model';
import { IPageOrigin } from './protocol';

interface IEntry {
  link: KernelLink;
  panels: Set<NotebookPanel>;
}

/**
 * Links the kernels of the open notebooks and follows the current one.
 */
export class NotebookFollower {
  /**
   * @param tracker - the notebooks.
   * @param model - the model whose `current` follows the current notebook.
   * @param client - who we are, for the kernel (`jupyterlab`, `notebook`).
   * @param page - where this page is, told each kernel in the `hello`.
   */
  constructor(
    readonly tracker: INotebookTracker,
    readonly model: FileBrokerModel,
    readonly client: string,
    readonly page?: IPageOrigin
  ) {
    tracker.widgetAdded.connect((_, panel) => this._watch(panel));
    tracker.forEach(panel => this._watch(panel));
    tracker.currentChanged.connect(this._updateCurrent, this);
    this._updateCurrent();
  }

  /**
   * Emitted with each new kernel model (the consent dialogs listen to all of them).
   */
  get modelAdded(): ISignal<this, BrokerModel> {
    return this._modelAdded;
  }

  /**
   * Every kernel model linked now.
   */
  get models(): BrokerModel[] {
    return [...this._entries.values()].map(entry => entry.link.model);
  }

  /**
   * Ask the current kernel again (the panel's "Check again").
   */
  retry(): void {
    const kernel = this.tracker.currentWidget?.sessionContext.session?.kernel;
    const entry = kernel ? this._entries.get(kernel.id) : undefined;
    if (entry) {
      void entry.link.probe();
    }
  }

  /**
   * Close every link (the page is going away): the kernels forget our comms.
   */
  dispose(): void {
    for (const entry of this._entries.values()) {
      entry.link.dispose();
    }
    this._entries.clear();
    this.model.current = null;
  }

  private _watch(panel: NotebookPanel): void {
    if (this._kernels.has(panel)) {
      return;
    }
    this._kernels.set(panel, null);
    const context = panel.sessionContext;
    const rebind = () => {
      this._bind(panel, context.session?.kernel ?? null);
    };
    context.kernelChanged.connect(rebind);
    context.sessionChanged.connect(rebind);
    panel.title.changed.connect(() => this._relabel(panel));
    panel.disposed.connect(() => {
      context.kernelChanged.disconnect(rebind);
      context.sessionChanged.disconnect(rebind);
      this._bind(panel, null);
      this._kernels.delete(panel);
      this._updateCurrent();
    });
    void context.ready.then(rebind).catch(() => undefined);
    rebind();
  }

  private _bind(
    panel: NotebookPanel,
    kernel: Kernel.IKernelConnection | null
  ): void {
    const before = this._kernels.get(panel) ?? null;
    if (before === kernel) {
      return;
    }
    if (before) {
      const entry = this._entries.get(before.id);
      if (entry) {
        entry.panels.delete(panel);
        if (!entry.panels.size || entry.link.kernel !== before) {
          entry.link.dispose();
          this._entries.delete(before.id);
        }
      }
    }
    this._kernels.set(panel, kernel);
    if (kernel) {
      let entry = this._entries.get(kernel.id);
      if (!entry || entry.link.kernel !== kernel) {
        entry?.link.dispose();
        const model = new BrokerModel(panel.title.label);
        // Owned by the entry: disposed when its last notebook lets go of the kernel.
        // eslint-disable-next-line jupyter/require-disposable-ownership
        const link = new KernelLink(kernel, model, this.client, this.page);
        entry = { link, panels: new Set() };
        this._entries.set(kernel.id, entry);
        kernel.disposed.connect(() => {
          const current = this._entries.get(kernel.id);
          if (current && current.link.kernel === kernel) {
            current.link.dispose();
            this._entries.delete(kernel.id);
            this._updateCurrent();
          }
        });
        this._modelAdded.emit(model);
      }
      entry.panels.add(panel);
    }
    this._updateCurrent();
  }

  private _relabel(panel: NotebookPanel): void {
    const kernel = this._kernels.get(panel);
    const entry = kernel ? this._entries.get(kernel.id) : undefined;
    if (entry) {
      entry.link.model.label = panel.title.label;
    }
  }

  private _updateCurrent(): void {
    const panel = this.tracker.currentWidget;
    const kernel = panel ? (this._kernels.get(panel) ?? null) : null;
    const entry = kernel ? this._entries.get(kernel.id) : undefined;
    if (entry && panel) {
      entry.link.model.label = panel.title.label;
    }
    this.model.current = entry ? entry.link.model : null;
  }

  private _kernels = new Map<NotebookPanel, Kernel.IKernelConnection | null>();
  private _entries = new Map<string, IEntry>();
  private _modelAdded = new Signal<this, BrokerModel>(this);
}
