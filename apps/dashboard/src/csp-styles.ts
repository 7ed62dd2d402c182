/**
 * Lets styles a library writes into `<style>` elements under `root` apply under the dashboard's Content-Security-
 * Policy (`style-src 'self'`, no inline styles: security-headers.ts), which blocks those elements. xterm.js keeps
 * its colours, fonts and `white-space: pre` there (without them runs of blanks collapse and a full-screen
 * program's columns slide left), and rewrites them as the terminal resizes or changes theme. Their text is
 * mirrored into one constructed stylesheet adopted by the document, which the policy does not govern, and kept
 * in step as the elements change. Returns what stops it.
 */
export function mirrorInlineStyles(root: HTMLElement): () => void {
  const sheet = new CSSStyleSheet();
  document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
  let copied = '';
  const copy = () => {
    const text = Array.from(root.querySelectorAll('style'), (style) => style.textContent ?? '').join('\n');
    // Parsing it again restyles the whole page: only when it changed.
    if (text === copied) return;
    copied = text;
    sheet.replaceSync(text);
  };
  copy();
  // Every redraw of the terminal's rows is a mutation too: only those of a <style> element are looked at.
  const isStyle = (node: Node) => node.nodeName === 'STYLE' || node.parentNode?.nodeName === 'STYLE';
  const observer = new MutationObserver((mutations) => {
    if (mutations.some((m) => isStyle(m.target) || Array.from(m.addedNodes).some(isStyle))) copy();
  });
  observer.observe(root, { subtree: true, childList: true, characterData: true });
  return () => {
    observer.disconnect();
    document.adoptedStyleSheets = document.adoptedStyleSheets.filter((adopted) => adopted !== sheet);
  };
}
