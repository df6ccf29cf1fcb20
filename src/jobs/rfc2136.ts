/**
 * DNS UPDATE (RFC 2136) signed with TSIG (RFC 8945), over UDP: how DNS-01's TXT records are written to
 * the zone's primary (BERTH_ACME_DNS_*).
 *
 * Written here rather than with a DNS library: none of npm's maintained packet libraries signs with
 * TSIG (dns-packet and its @leichtgewicht fork, dns2, native-dns-packet), and dns-packet cannot even
 * express the class NONE that deletes one record (RFC 2136 §2.5.4). An UPDATE with one zone and a few
 * TXT records is a few dozen bytes of wire format, and the TSIG MAC is one HMAC over it.
 * @module
 */
import { createHmac, randomInt } from 'node:crypto';
import dgram from 'node:dgram';
import net from 'node:net';
import type { AcmeDnsUpdate } from '../config.ts';

export interface TxtChange {
  action: 'add' | 'delete';
  /** The record's owner name, no final dot. */
  name: string;
  value: string;
}

const TYPE = { SOA: 6, TXT: 16, TSIG: 250 } as const;
const CLASS = { IN: 1, NONE: 254, ANY: 255 } as const;
const OPCODE_UPDATE = 5;
/** Seconds the TXT records live in resolvers' caches: short, they are gone a minute later. */
const TXT_TTL = 60;
/** How far the server's clock may be from ours (RFC 8945 recommends 300 s). */
const FUDGE_SECONDS = 300;
const ATTEMPTS = 3;
const ATTEMPT_TIMEOUT_MS = 5_000;

/** The RCODEs (and TSIG errors) a server answers an UPDATE with, in words an operator can act on. */
const RCODES: Record<number, string> = {
  1: 'FORMERR (the server could not parse the update)',
  2: 'SERVFAIL (the server failed to apply it)',
  3: 'NXDOMAIN (a prerequisite name does not exist)',
  4: 'NOTIMP (the server does not take dynamic updates)',
  5: "REFUSED (the key may not update this zone: check the server's update ACL for the key)",
  8: 'NXRRSET',
  9: 'NOTAUTH (the server is not authoritative for the zone, or the key was not accepted)',
  10: 'NOTZONE (the name is not in BERTH_ACME_DNS_ZONE)',
  16: "BADSIG (the TSIG secret or algorithm does not match the server's key)",
  // Knot DNS answers a key its ACL does not let update the name with BADKEY too.
  17: 'BADKEY (the server knows no key of this name and algorithm, or its policy does not let the key update this name)',
  18: "BADTIME (this machine's clock and the server's differ by more than 5 minutes)",
};

/** A domain name in uncompressed, lower-case wire form (TSIG's MAC is over the canonical form). */
function wireName(name: string): Buffer {
  const labels = name.toLowerCase().replace(/\.$/, '').split('.').filter(Boolean);
  return Buffer.concat([
    ...labels.map((label) => Buffer.concat([Buffer.from([label.length]), Buffer.from(label, 'ascii')])),
    Buffer.from([0]),
  ]);
}

const u16 = (n: number) => {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n);
  return b;
};
const u32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
};
const u48 = (n: number) => {
  const b = Buffer.alloc(6);
  b.writeUIntBE(n, 0, 6);
  return b;
};

/** TXT RDATA: the value as character-strings of at most 255 bytes. */
function txtData(value: string): Buffer {
  const bytes = Buffer.from(value, 'utf8');
  const parts: Buffer[] = [];
  for (let at = 0; at < bytes.length || parts.length === 0; at += 255) {
    const chunk = bytes.subarray(at, at + 255);
    parts.push(Buffer.from([chunk.length]), chunk);
  }
  return Buffer.concat(parts);
}

function record(name: string, type: number, klass: number, ttl: number, data: Buffer): Buffer {
  return Buffer.concat([wireName(name), u16(type), u16(klass), u32(ttl), u16(data.length), data]);
}

/** The UPDATE message, unsigned: header, zone section, and the changes as its update section. */
export function updateMessage(id: number, zone: string, changes: TxtChange[]): Buffer {
  const header = Buffer.concat([
    u16(id),
    u16(OPCODE_UPDATE << 11),
    u16(1),
    u16(0),
    u16(changes.length),
    u16(0),
  ]);
  const zoneSection = Buffer.concat([wireName(zone), u16(TYPE.SOA), u16(CLASS.IN)]);
  const updates = changes.map((change) =>
    change.action === 'add'
      ? record(change.name, TYPE.TXT, CLASS.IN, TXT_TTL, txtData(change.value))
      : // Class NONE with the value: deletes this one record, not others beside it (RFC 2136 §2.5.4).
        record(change.name, TYPE.TXT, CLASS.NONE, 0, txtData(change.value)),
  );
  return Buffer.concat([header, zoneSection, ...updates]);
}

/** The message with its TSIG record appended (RFC 8945 §4.2), ARCOUNT counting it. */
export function signMessage(message: Buffer, tsig: AcmeDnsUpdate['tsig'], now = Date.now()): Buffer {
  const timeSigned = u48(Math.floor(now / 1000));
  const algorithm = wireName(tsig.algorithm);
  const variables = Buffer.concat([
    wireName(tsig.name),
    u16(CLASS.ANY),
    u32(0),
    algorithm,
    timeSigned,
    u16(FUDGE_SECONDS),
    u16(0), // error
    u16(0), // other length
  ]);
  const mac = createHmac(tsig.algorithm.replace('hmac-', ''), tsig.secret)
    .update(Buffer.concat([message, variables]))
    .digest();
  const rdata = Buffer.concat([
    algorithm,
    timeSigned,
    u16(FUDGE_SECONDS),
    u16(mac.length),
    mac,
    message.subarray(0, 2), // original id
    u16(0),
    u16(0),
  ]);
  const signed = Buffer.concat([message, record(tsig.name, TYPE.TSIG, CLASS.ANY, 0, rdata)]);
  signed.writeUInt16BE(message.readUInt16BE(10) + 1, 10);
  return signed;
}

/**
 * The TSIG error of a response, if it carries a TSIG record: the last record of the additional section.
 * The server answers a bad signature with NOTAUTH and says why there. The response's own MAC is not
 * checked: a forged success only makes the CA's lookup fail, which the order reports.
 */
function tsigError(response: Buffer): number {
  const skipName = (at: number) => {
    while (at < response.length) {
      const length = response[at] as number;
      if (length === 0) return at + 1;
      if ((length & 0xc0) === 0xc0) return at + 2;
      at += length + 1;
    }
    return at;
  };
  let at = 12;
  const counts = [0, 1, 2, 3].map((i) => response.readUInt16BE(4 + i * 2));
  for (let i = 0; i < (counts[0] as number); i++) at = skipName(at) + 4;
  const records = (counts[1] as number) + (counts[2] as number) + (counts[3] as number);
  for (let i = 0; i < records; i++) {
    at = skipName(at);
    const type = response.readUInt16BE(at);
    const length = response.readUInt16BE(at + 8);
    const data = at + 10;
    if (i === records - 1 && type === TYPE.TSIG) {
      const afterAlgorithm = skipName(data);
      const macSize = response.readUInt16BE(afterAlgorithm + 8);
      return response.readUInt16BE(afterAlgorithm + 10 + macSize + 2);
    }
    at = data + length;
  }
  return 0;
}

function exchange(server: AcmeDnsUpdate['server'], message: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const socket = dgram.createSocket(net.isIPv6(server.host) ? 'udp6' : 'udp4');
    const timer = setTimeout(() => {
      socket.close();
      reject(new Error(`no answer from ${server.host}:${server.port} within ${ATTEMPT_TIMEOUT_MS / 1000} s`));
    }, ATTEMPT_TIMEOUT_MS);
    socket.on('message', (response) => {
      // Only the answer to this message (same id, a response); anything else is ignored.
      if (
        response.length < 12 ||
        response.readUInt16BE(0) !== message.readUInt16BE(0) ||
        ((response[2] ?? 0) & 0x80) === 0
      )
        return;
      clearTimeout(timer);
      socket.close();
      resolve(response);
    });
    socket.on('error', (error) => {
      clearTimeout(timer);
      socket.close();
      reject(error);
    });
    socket.send(message, server.port, server.host);
  });
}

/** Applies the changes in one signed UPDATE; rejects with the server's reason. */
export async function updateTxt(settings: AcmeDnsUpdate, changes: TxtChange[]): Promise<void> {
  const outside = changes.find((c) => c.name !== settings.zone && !c.name.endsWith(`.${settings.zone}`));
  if (outside) throw new Error(`${outside.name} is not in the zone ${settings.zone} (BERTH_ACME_DNS_ZONE)`);
  let lastError: Error | undefined;
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    // Signed afresh each attempt: a new id, and a time within the server's fudge.
    const message = signMessage(updateMessage(randomInt(0, 0x10000), settings.zone, changes), settings.tsig);
    let response: Buffer;
    try {
      response = await exchange(settings.server, message);
    } catch (error) {
      lastError = error as Error;
      continue;
    }
    const rcode = (response[3] as number) & 0x0f;
    if (rcode === 0) return;
    const error = tsigError(response);
    const reason = RCODES[error] ?? RCODES[rcode] ?? `RCODE ${rcode}`;
    throw new Error(
      `the DNS server ${settings.server.host}:${settings.server.port} refused the update of ${changes[0]?.name} in ${settings.zone}: ${reason}`,
    );
  }
  throw new Error(
    `the DNS server ${settings.server.host}:${settings.server.port} did not answer the update (${lastError?.message})`,
  );
}
