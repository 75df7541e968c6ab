/**
 * The status bar item: "File broker: 2 servers · 1 lock", with a badge while a
 * consent request waits; a click opens the sidebar. A view of the model only.
 */

import { ReactWidget, UseSignal } from '@jupyterlab/ui-components';
import React from 'react';

import { FileBrokerModel, plural } from './model';
import { fileBrokerIcon } from './sidebar';

import { STATUS_ID } from './tokens';

/**
 * The status bar item.
 */
export class FileBrokerStatus extends ReactWidget {
  /**
   * @param model - what to summarise.
   * @param open - opens the sidebar.
   */
  constructor(
    private readonly _model: FileBrokerModel,
    private readonly _open: () => void
  ) {
    super();
    this.id = STATUS_ID;
    this.addClass('fsbroker-status');
    this.addClass('jp-StatusBar-GroupItem');
    this.node.title = 'File Broker: show the sidebar';
    this.node.setAttribute('role', 'button');
    this.node.addEventListener('click', () => this._open());
  }

  render(): JSX.Element {
    return (
      <UseSignal signal={this._model.changed}>
        {() => {
          const waiting = this._model.current?.pendingConsents.length ?? 0;
          return (
            <>
              <fileBrokerIcon.react
                tag="span"
                className="fsbroker-status-icon"
              />
              <span className="jp-StatusBar-TextItem fsbroker-status-text">
                {this._model.summary}
              </span>
              {waiting > 0 && (
                <span
                  className="fsbroker-status-badge"
                  title={`${plural(waiting, 'consent request')} waiting`}
                >
                  {waiting}
                </span>
              )}
            </>
          );
        }}
      </UseSignal>
    );
  }
}
