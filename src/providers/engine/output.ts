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

/**
 * The last lines a dependency printed, for a failure reason: `logs` reads its last ten lines (a
 * container's or a swarm service's); nothing when it cannot.
 */
export async function lastOutput(logs: () => Promise<Buffer>): Promise<string> {
  try {
    const text = demultiplex(await logs()).trim();
    return text ? ` Last output: ${text.slice(-800)}` : '';
  } catch {
    return '';
  }
}
