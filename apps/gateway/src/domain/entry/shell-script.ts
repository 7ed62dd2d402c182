/** A value as one single-quoted shell word: nothing inside it is ever interpreted. */
export function shellQuote(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`;
}

/**
 * A script users pipe to `sh`: a fixed body under its settings, assigned at the top as quoted words. Every script
 * gets CCP_PLAIN_HTTP_WARNING, empty when what it fetches and sends is protected; the body prints it to stderr
 * before it sends anything.
 */
export function shellScript(script: {
  title: string;
  settings: Record<string, string>;
  plainHttpWarning: string | null;
  body: string;
}): string {
  const assignments = Object.entries({
    ...script.settings,
    CCP_PLAIN_HTTP_WARNING: script.plainHttpWarning ?? '',
  })
    .map(([name, value]) => `${name}=${shellQuote(value)}`)
    .join('\n');
  return `#!/bin/sh\n# cloud-cli-proxy: ${script.title}\n${assignments}\n\n${script.body}`;
}
