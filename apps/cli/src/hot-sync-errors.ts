/** Thrown to end a pass when the SFTP channel went away; the base is left as it was for unfinished paths. */
export class Detached extends Error {}

/** A path whose other side changed between the scan and the write: left for the next pass to judge. */
export class Moved extends Error {}
