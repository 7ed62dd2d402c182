/** Kept equal to package.json's version (a test checks), so the bundled single file needs no package.json. */
export const VERSION = '0.1.0';
