import ssh2, { type InputAttributes, type SFTPWrapper, type Stats } from 'ssh2';

const { STATUS_CODE } = ssh2.utils.sftp;

/** An SFTP error with its status code (ssh2 puts it on `code`). */
export function isMissing(error: unknown): boolean {
  return (error as { code?: unknown }).code === STATUS_CODE.NO_SUCH_FILE;
}

export interface RemoteEntry {
  /** As the workspace's SFTP server sent it, which its root can replace: any string, checked by the caller. */
  name: string;
  attrs: Stats;
}

/** The few SFTP requests hot sync makes, as promises. Paths are absolute paths in the workspace. */
export class RemoteFs {
  private ended = false;

  constructor(private readonly sftp: SFTPWrapper) {
    const end = () => {
      this.ended = true;
    };
    sftp.once('close', end).once('end', end);
  }

  private call<T>(start: (done: (error: Error | null | undefined, value?: T) => void) => void): Promise<T> {
    return new Promise((resolve, reject) => {
      // ssh2 takes requests on a closed session without sending them, and never answers them.
      if (this.ended) return reject(new Error('the SFTP session has ended'));
      try {
        start((error, value) => (error ? reject(error) : resolve(value as T)));
      } catch (error) {
        // ssh2 throws synchronously when the channel is already closed.
        reject(error);
      }
    });
  }

  /** The entry itself (a link is not followed), or null when nothing is there. */
  lstat(path: string): Promise<Stats | null> {
    return this.call<Stats>((done) => this.sftp.lstat(path, done)).catch((error) => {
      if (isMissing(error)) return null;
      throw error;
    });
  }

  /**
   * Lists a directory through its handle: ssh2's readdir by path closes the handle before calling back on an
   * error, and that close, sent on a session that has just ended, is never answered.
   */
  async readdir(path: string): Promise<RemoteEntry[]> {
    const handle = await this.call<Buffer>((done) => this.sftp.opendir(path, done));
    const entries: RemoteEntry[] = [];
    try {
      for (;;) {
        const list = await this.call<Array<{ filename: string; attrs: Stats }>>((done) =>
          this.sftp.readdir(handle, done),
        ).catch((error: unknown) => {
          if ((error as { code?: unknown }).code === STATUS_CODE.EOF) return null;
          throw error;
        });
        if (!list) return entries;
        for (const entry of list) entries.push({ name: entry.filename, attrs: entry.attrs });
      }
    } finally {
      await this.close(handle).catch(() => {});
    }
  }

  readlink(path: string): Promise<string> {
    return this.call<string>((done) => this.sftp.readlink(path, done));
  }

  realpath(path: string): Promise<string> {
    return this.call<string>((done) => this.sftp.realpath(path, done));
  }

  mkdir(path: string, mode: number): Promise<void> {
    return this.call<void>((done) => this.sftp.mkdir(path, { mode }, done));
  }

  rmdir(path: string): Promise<void> {
    return this.call<void>((done) => this.sftp.rmdir(path, done));
  }

  unlink(path: string): Promise<void> {
    return this.call<void>((done) => this.sftp.unlink(path, done));
  }

  symlink(target: string, linkPath: string): Promise<void> {
    return this.call<void>((done) => this.sftp.symlink(target, linkPath, done));
  }

  /** Replaces `to` if it exists, in one step (OpenSSH's posix-rename; plain SFTP rename refuses). */
  rename(from: string, to: string): Promise<void> {
    return this.call<void>((done) => this.sftp.ext_openssh_rename(from, to, done));
  }

  /** Fails when `to` exists (OpenSSH's sftp-server never replaces with a plain rename). */
  renameNoReplace(from: string, to: string): Promise<void> {
    return this.call<void>((done) => this.sftp.rename(from, to, done));
  }

  open(path: string, flags: 'r' | 'wx', attrs: InputAttributes = {}): Promise<Buffer> {
    return this.call<Buffer>((done) => this.sftp.open(path, flags, attrs, done));
  }

  fstat(handle: Buffer): Promise<Stats> {
    return this.call<Stats>((done) => this.sftp.fstat(handle, done));
  }

  fsetstat(handle: Buffer, attrs: InputAttributes): Promise<void> {
    return this.call<void>((done) => this.sftp.fsetstat(handle, attrs, done));
  }

  close(handle: Buffer): Promise<void> {
    return this.call<void>((done) => this.sftp.close(handle, done));
  }

  write(handle: Buffer, data: Buffer, position: number): Promise<void> {
    return this.call<void>((done) => this.sftp.write(handle, data, 0, data.length, position, done));
  }

  read(handle: Buffer, into: Buffer, length: number, position: number): Promise<number> {
    return this.call<number>((done) =>
      this.sftp.read(handle, into, 0, length, position, (error, bytesRead) => done(error, bytesRead)),
    );
  }
}
