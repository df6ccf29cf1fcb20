import type { AddressInfo } from 'node:net';
import dns2 from 'dns2';

const { Packet } = dns2;

/**
 * A real DNS server on a loopback UDP port, answering from a table the test fills in. Unknown names get
 * an empty answer, as a zone without the record would.
 */
export interface TestDnsServer {
  /** `host:port`, the form BERTH_DNS_SERVERS takes. */
  address: string;
  set(name: string, type: 'A' | 'CNAME', values: string[]): void;
  clear(): void;
  close(): Promise<void>;
}

export async function startDnsServer(): Promise<TestDnsServer> {
  const records = new Map<string, string[]>();
  const keyOf = (name: string, type: string) => `${type} ${name.toLowerCase().replace(/\.$/, '')}`;
  const server = dns2.createServer({
    udp: true,
    handle: (request, send) => {
      const response = Packet.createResponseFromRequest(request);
      for (const question of request.questions) {
        const type =
          question.type === Packet.TYPE.A ? 'A' : question.type === Packet.TYPE.CNAME ? 'CNAME' : '';
        for (const value of records.get(keyOf(question.name, type)) ?? []) {
          const answer =
            type === 'A'
              ? { name: question.name, type: Packet.TYPE.A, class: Packet.CLASS.IN, ttl: 1, address: value }
              : {
                  name: question.name,
                  type: Packet.TYPE.CNAME,
                  class: Packet.CLASS.IN,
                  ttl: 1,
                  domain: value,
                };
          // dns2's typings want a parsed Resource; its encoder takes these plain records.
          response.answers.push(answer as unknown as (typeof response.answers)[number]);
        }
      }
      send(response);
    },
  });
  const listening = new Promise<void>((resolve) => server.on('listening', () => resolve()));
  await server.listen({ udp: { port: 0, address: '127.0.0.1' } });
  await listening;
  const { port } = (server.addresses() as { udp: AddressInfo }).udp;
  return {
    address: `127.0.0.1:${port}`,
    set: (name, type, values) => records.set(keyOf(name, type), values),
    clear: () => records.clear(),
    close: async () => {
      await server.close();
    },
  };
}
