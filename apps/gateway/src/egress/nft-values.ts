/**
 * Checks for values placed into generated nftables text: anything that is not plainly a name, mark, port or
 * address of the expected shape is refused before it can change the meaning of a ruleset.
 */

const INTERFACE = /^[A-Za-z0-9_.@-]{1,15}$/;
const TABLE = /^[A-Za-z_][A-Za-z0-9_.-]{0,127}$/;
const MAC = /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/;

export function nftTable(value: string): string {
  if (!TABLE.test(value)) throw new TypeError(`table is not a valid nftables name: ${value}`);
  return value;
}

export function nftInterface(name: string, value: string): string {
  if (!INTERFACE.test(value)) throw new TypeError(`${name} is not a valid interface name: ${value}`);
  return `"${value}"`;
}

export function nftMark(name: string, value: number): string {
  if (!Number.isInteger(value) || value < 1 || value > 0xffffffff) {
    throw new TypeError(`${name} must be a non-zero 32-bit mark: ${value}`);
  }
  return `0x${value.toString(16).padStart(8, '0')}`;
}

export function nftPort(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 1 || value > 65535) {
    throw new TypeError(`${name} must be a port number: ${value}`);
  }
  return value;
}

export function nftMac(name: string, value: string): string {
  const lower = value.toLowerCase();
  if (!MAC.test(lower)) throw new TypeError(`${name} is not a MAC address: ${value}`);
  return lower;
}
