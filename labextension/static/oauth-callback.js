/*
 * The OAuth redirect target of a kernel that the browser cannot reach (a remote kernel).
 *
 * The authorization server sends the browser here with `?code=…&state=…&iss=…`. The page
 * hands that query to the JupyterLab tabs of this origin on the BroadcastChannel
 * `jupyter_fsbroker.oauth`; the tab whose kernel waits for this sign-in (same `state`) relays
 * it to the kernel over the panel's comm and acknowledges with the kernel's answer. With no
 * answer within 5 s, the page shows the address for the person to paste into the sign-in
 * card instead. The query leaves the address bar and the history at once.
 */
(function () {
  'use strict';

  var CHANNEL = 'jupyter_fsbroker.oauth';
  var WAIT_MS = 5000;

  var search = window.location.search;
  var address = window.location.origin + window.location.pathname + search;
  // The code must not stay in the address bar, the history or a bookmark.
  window.history.replaceState(null, '', window.location.pathname);

  function element(id) {
    return document.getElementById(id);
  }

  function say(title, message, isError) {
    element('fsbroker-oauth-title').textContent = title;
    var text = element('fsbroker-oauth-message');
    text.textContent = message;
    text.className = isError ? 'fsbroker-oauth-error' : '';
  }

  function offerPaste() {
    say(
      'Sign-in not handed over',
      'No JupyterLab tab of this server took it.',
      false
    );
    element('fsbroker-oauth-address').value = address;
    element('fsbroker-oauth-paste').hidden = false;
    element('fsbroker-oauth-copy').addEventListener('click', function () {
      var field = element('fsbroker-oauth-address');
      field.select();
      if (navigator.clipboard && window.isSecureContext) {
        void navigator.clipboard.writeText(field.value);
      } else {
        document.execCommand('copy');
      }
    });
  }

  var params = new URLSearchParams(search);
  var state = params.get('state');
  if (!state || !(params.get('code') || params.get('error'))) {
    say(
      'Nothing to sign in with',
      'This page is where a sign-in comes back; this address holds none.',
      true
    );
    return;
  }
  if (typeof BroadcastChannel === 'undefined') {
    offerPaste();
    return;
  }

  var channel = new BroadcastChannel(CHANNEL);
  var refused = null;
  var timer = window.setTimeout(function () {
    channel.close();
    if (refused !== null) {
      say('Sign-in refused', refused, true);
    } else {
      offerPaste();
    }
  }, WAIT_MS);

  channel.onmessage = function (event) {
    var data = event.data;
    if (!data || data.type !== 'oauth-ack' || data.state !== state) {
      return;
    }
    if (!data.ok) {
      // Another tab of the same kernel may still take it: wait for a better answer.
      refused = String(data.message || 'The notebook refused this sign-in.');
      return;
    }
    window.clearTimeout(timer);
    channel.close();
    // The kernel's words say whether the tokens are in hand ("Signed in to …") or still on
    // their way ("Sign-in received; …"): the title claims neither.
    say(
      'Return to your notebook',
      String(data.message || 'You can close this tab.'),
      false
    );
  };
  channel.postMessage({ type: 'oauth-redirect', search: search });
})();
