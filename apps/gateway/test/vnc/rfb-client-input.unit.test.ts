import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RfbClientInput } from '../../src/vnc/rfb-client-input.js';

const clientInit = Buffer.from([1]);
const setEncodings = (count: number) => {
  const message = Buffer.alloc(4 + 4 * count);
  message[0] = 2;
  message.writeUInt16BE(count, 2);
  return message;
};
const updateRequest = Buffer.from([3, 1, 0, 0, 0, 0, 4, 0, 3, 0]);
const key = Buffer.from([4, 1, 0, 0, 0, 0, 0, 0x61]);
const pointer = Buffer.from([5, 0, 0, 10, 0, 20]);
const cutText = (text: string) => {
  const message = Buffer.alloc(8 + text.length);
  message[0] = 6;
  message.writeInt32BE(text.length, 4);
  message.write(text, 8, 'latin1');
  return message;
};
const fence = Buffer.from([248, 0, 0, 0, 0, 0, 0, 1, 3, 0xaa, 0xbb, 0xcc]);

describe('RFB client input', () => {
  it('counts keys, pointer moves and clipboard, not what a viewer asks for on its own', () => {
    const input = new RfbClientInput();
    input.feed(Buffer.concat([clientInit, setEncodings(12), updateRequest, fence, updateRequest]));
    for (let i = 0; i < 50; i++) input.feed(updateRequest);
    assert.equal(input.events, 0, 'a viewer left open');
    input.feed(Buffer.concat([key, pointer, cutText('hello'), updateRequest]));
    assert.equal(input.events, 3);
  });

  it('follows messages split across and joined in any chunks', () => {
    const stream = Buffer.concat([
      clientInit,
      setEncodings(3),
      updateRequest,
      key,
      cutText('a longer piece of clipboard text'),
      pointer,
      updateRequest,
      key,
    ]);
    for (const size of [1, 2, 3, 7, 13]) {
      const input = new RfbClientInput();
      for (let at = 0; at < stream.length; at += size) input.feed(stream.subarray(at, at + size));
      assert.equal(input.events, 4, `chunks of ${size}`);
    }
  });

  it('passes over a large clipboard without keeping it', () => {
    const input = new RfbClientInput();
    const header = Buffer.alloc(8);
    header[0] = 6;
    header.writeInt32BE(8 << 20, 4);
    input.feed(Buffer.concat([clientInit, header]));
    for (let i = 0; i < 8; i++) input.feed(Buffer.alloc(1 << 20));
    input.feed(Buffer.concat([updateRequest, key]));
    assert.equal(input.events, 2);
  });

  it('takes every message as input once it meets one it does not know', () => {
    const input = new RfbClientInput();
    input.feed(Buffer.concat([clientInit, updateRequest, Buffer.from([99, 0, 0, 0])]));
    assert.equal(input.events, 1);
    input.feed(updateRequest);
    assert.equal(input.events, 2, 'its reading is lost: a used desktop never looks idle');
  });
});
