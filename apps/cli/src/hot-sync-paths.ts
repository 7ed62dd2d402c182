/**
 * Whether `name` can be one entry of a folder on every system. Names listed by the workspace come from its
 * SFTP server, which its root can replace: a separator (`/`, or `\` on Windows), NUL, `.` or `..` in one
 * would lead the copy on this machine elsewhere.
 */
export function isPlainName(name: string): boolean {
  return name !== '' && name !== '.' && name !== '..' && !/[/\\\0]/.test(name);
}
