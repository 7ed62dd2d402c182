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

function connect() {
  again.hidden = true;
  status.textContent = 'Connecting…';
  const rfb = new RFB(screen, stream.href);
  rfb.scaleViewport = true;
  rfb.resizeSession = false;
  rfb.addEventListener('connect', () => {
    status.textContent = 'Connected';
    rfb.focus();
  });
  rfb.addEventListener('disconnect', (event) => {
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

again.addEventListener('click', connect);
connect();
