import type { Node } from '@ccp/api';

/**
 * How the new-host form offers a node to pin the host to. A node that is not heartbeating is listed but cannot
 * be chosen, since the API refuses it (409 `node_unavailable`). A full one can (a pinned host goes past
 * NODE_MAX_HOSTS), and so can one without both images, whose hosts start once the images are built there.
 */
export function nodeChoice(node: Node): { label: string; disabled: boolean } {
  const notes = [`${node.hosts}/${node.max_hosts} hosts`];
  if (!node.images_ready) notes.push('images not built');
  if (node.state === 'unavailable') notes.push('unavailable');
  return { label: `${node.name} (${notes.join(', ')})`, disabled: node.state === 'unavailable' };
}
