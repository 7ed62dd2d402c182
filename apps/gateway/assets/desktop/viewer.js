// The desktop's web client, served by the gateway itself (never by the workspace): noVNC's RFB client on the
// stream one level below this page. The workspace only ever gets to speak RFB over that WebSocket.
import RFB from './core/rfb.js';

const status = document.getElementById('status');
const again = document.getElementById('reconnect');
const screen = document.getElementById('screen');
// The stream sits beside this page, on this origin: no parameter can point the client anywhere else.
const stream = new URL('websockify', window.location.href);
stream.protocol = window.location.protocol === 'https:' ? 'wss:' : 'ws:';
stream.search = '';
// A connection that fails before the desktop answers (a desktop still coming up after a restart, a blip on the
// way) is tried again by itself a few times; one that was up and ended is left to the Reconnect button.
const RETRIES = 3;

function connect(retry = 0) {
  again.hidden = true;
  status.textContent = retry === 0 ? 'Connecting…' : `Connecting again (${retry} of ${RETRIES})…`;
  let connected = false;
  const rfb = new RFB(screen, stream.href);
  rfb.scaleViewport = true;
  rfb.resizeSession = false;
  rfb.addEventListener('connect', () => {
    connected = true;
    status.textContent = 'Connected';
    rfb.focus();
  });
  rfb.addEventListener('disconnect', (event) => {
    if (!connected && !event.detail.clean && retry < RETRIES) {
      status.textContent = 'Could not reach the desktop; trying again…';
      setTimeout(() => connect(retry + 1), 1000 * (retry + 1));
      return;
    }
    status.textContent = event.detail.clean ? 'Disconnected' : 'The connection was lost';
    again.hidden = false;
  });
  rfb.addEventListener('credentialsrequired', () => {
    status.textContent = 'The desktop asked for a password the gateway does not have';
  });
  rfb.addEventListener('desktopname', (event) => {
    document.title = `${event.detail.name} · cloud-cli-proxy`;
  });
}

again.addEventListener('click', () => connect());
connect();
