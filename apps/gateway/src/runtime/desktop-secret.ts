import { vncPasswordFile } from '../shared/vnc-des.js';

/** Where the workspace finds its desktop's VNC password (image/README.md, `WORKSPACE_DESKTOP_PASSWORD_FILE`). */
export const DESKTOP_PASSWORD_DIR = '/etc/ccp-desktop';
export const DESKTOP_PASSWORD_FILE = `${DESKTOP_PASSWORD_DIR}/vncpasswd`;

/**
 * The desktop's password file as a tar archive to put into a new workspace container before it starts (the
 * engine's archive upload): it then lives in that container alone, root-only, and goes with it. Nothing is
 * written on the gateway's machine, and `docker inspect` does not show it (as it would an environment variable).
 */
export function desktopPasswordArchive(password: string): Buffer {
  const name = DESKTOP_PASSWORD_DIR.slice(1);
  const file = vncPasswordFile(password);
  return Buffer.concat([
    tarHeader(`${name}/`, 0o700, 0, '5'),
    tarHeader(`${name}/vncpasswd`, 0o600, file.length, '0'),
    file,
    Buffer.alloc((512 - (file.length % 512)) % 512),
    // The end of an archive: two empty blocks.
    Buffer.alloc(1024),
  ]);
}

/** One ustar header, owned by root: `type` 0 is a file, 5 a directory. */
function tarHeader(name: string, mode: number, size: number, type: '0' | '5'): Buffer {
  const header = Buffer.alloc(512);
  const octal = (value: number, at: number, width: number) =>
    header.write(`${value.toString(8).padStart(width - 1, '0')}\0`, at, 'latin1');
  header.write(name, 0, 100, 'latin1');
  octal(mode, 100, 8);
  octal(0, 108, 8);
  octal(0, 116, 8);
  octal(size, 124, 12);
  octal(0, 136, 12);
  header.write(type, 156, 'latin1');
  header.write('ustar\x0000', 257, 'latin1');
  // The checksum counts its own field as spaces.
  header.fill(' ', 148, 156);
  let sum = 0;
  for (const byte of header) sum += byte;
  header.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
  return header;
}
