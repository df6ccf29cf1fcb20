/** Reading what a container printed. */
/** Docker frames a non-TTY container's output: 8 bytes (stream, 0, 0, 0, size) before each chunk. */
export function demultiplex(buffer: Buffer): string {
  const chunks: Buffer[] = [];
  for (let at = 0; at + 8 <= buffer.length; ) {
    const size = buffer.readUInt32BE(at + 4);
    chunks.push(buffer.subarray(at + 8, at + 8 + size));
    at += 8 + size;
  }
  return Buffer.concat(chunks).toString('utf8');
}
