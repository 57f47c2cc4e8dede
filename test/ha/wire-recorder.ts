/**
 * A loopback TCP relay that records what a PostgreSQL client sends (PostgreSQL's frontend protocol,
 * version 3, without TLS): every simple Query with its text, every Parse with its statement name and
 * text, each tagged with the connection's transaction status when it was sent (from the server's last
 * ReadyForQuery: I idle, T in a transaction, E failed transaction). It changes nothing on the wire
 * unless told to cut a round trip's answer or to make the server unreachable.
 * test/ha/pooler-safety.test.ts puts it between a service instance and PgBouncer to show what the
 * service's statements leave on a connection that a pooler hands to the next client;
 * test/payments/commit-unacknowledged.test.ts between an instance and PostgreSQL, to lose the answer
 * of a COMMIT that the server carried out.
 */
import net from 'node:net';

export interface WireMessage {
  connection: number;
  kind: 'query' | 'parse';
  /** Parse only: '' is the unnamed statement (lives until the next Parse on that connection). */
  name: string;
  text: string;
  /** The transaction status of the connection when the message was sent. */
  status: 'I' | 'T' | 'E' | '?';
}

export interface WireRecorder {
  port: number;
  messages: WireMessage[];
  /** Connections that ended, in the order they did, with their transaction status at that moment. */
  closed: Array<{ connection: number; status: WireMessage['status'] }>;
  /**
   * The next simple Query that matches `match` (on a connection whose current transaction sent a
   * message matching `after`, when given) reaches the server and runs to its end (its ReadyForQuery),
   * but none of its answer reaches the client: the connection is cut then, as when the network fails
   * between a COMMIT and its acknowledgement. With `thenUnreachable`, every other connection is cut at
   * the same moment and new ones are refused until `reachable()`. Resolves with the query once cut.
   */
  cutAnswerOf(match: RegExp, opts?: { after?: RegExp; thenUnreachable?: boolean }): Promise<WireMessage>;
  /** Takes connections again after a cut with `thenUnreachable`. */
  reachable(): void;
  close(): Promise<void>;
}

interface Cut {
  match: RegExp;
  after?: RegExp;
  thenUnreachable: boolean;
  done: (m: WireMessage) => void;
}

const SSL_REQUEST = 80877103;
const GSS_REQUEST = 80877104;

export async function startWireRecorder(target: { host: string; port: number }): Promise<WireRecorder> {
  const messages: WireMessage[] = [];
  const closed: WireRecorder['closed'] = [];
  const sockets = new Set<net.Socket>();
  let connections = 0;
  let armed: Cut | undefined;
  let refusing = false;
  const server = net.createServer((client) => {
    if (refusing) {
      client.destroy();
      return;
    }
    const id = ++connections;
    const upstream = net.connect(target.port, target.host);
    sockets.add(client);
    sockets.add(upstream);
    // This connection's transaction sent a message matching the armed cut's `after`.
    let primed = false;
    // The round trip whose answer is withheld, and what to do once the server has finished it.
    let cutting: { cut: Cut; message: WireMessage } | undefined;
    function closeBoth() {
      if (!closed.some((c) => c.connection === id)) closed.push({ connection: id, status });
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    }
    let status: WireMessage['status'] = '?';
    let fromClient = Buffer.alloc(0);
    let started = false;
    let fromServer = Buffer.alloc(0);
    const cstring = (buf: Buffer, at: number): [string, number] => {
      const end = buf.indexOf(0, at);
      return [buf.toString('utf8', at, end), end + 1];
    };
    client.on('data', (chunk: Buffer) => {
      upstream.write(chunk);
      fromClient = Buffer.concat([fromClient, chunk]);
      for (;;) {
        if (!started) {
          if (fromClient.length < 8) return;
          const len = fromClient.readInt32BE(0);
          if (fromClient.length < len) return;
          const code = fromClient.readInt32BE(4);
          // Encrypted traffic cannot be read: refuse it (the service's test URLs ask for none).
          if (code === SSL_REQUEST || code === GSS_REQUEST) return closeBoth();
          fromClient = fromClient.subarray(len);
          started = true;
          continue;
        }
        if (fromClient.length < 5) return;
        const type = String.fromCharCode(fromClient[0]);
        const len = fromClient.readInt32BE(1);
        if (fromClient.length < 1 + len) return;
        const body = fromClient.subarray(5, 1 + len);
        if (type === 'Q') {
          const message: WireMessage = {
            connection: id,
            kind: 'query',
            name: '',
            text: cstring(body, 0)[0],
            status,
          };
          messages.push(message);
          if (armed?.after?.test(message.text)) primed = true;
          if (armed?.match.test(message.text) && (!armed.after || primed)) {
            cutting = { cut: armed, message };
            armed = undefined;
          }
        }
        if (type === 'P') {
          const [name, next] = cstring(body, 0);
          const text = cstring(body, next)[0];
          messages.push({ connection: id, kind: 'parse', name, text, status });
          if (armed?.after?.test(text)) primed = true;
        }
        fromClient = fromClient.subarray(1 + len);
      }
    });
    upstream.on('data', (chunk: Buffer) => {
      // The client sends its next query only after the last one's ReadyForQuery: all that comes back
      // while cutting is the cut round trip's answer.
      if (!cutting) client.write(chunk);
      fromServer = Buffer.concat([fromServer, chunk]);
      while (fromServer.length >= 5) {
        const len = fromServer.readInt32BE(1);
        if (fromServer.length < 1 + len) break;
        if (fromServer[0] === 0x5a /* Z: ReadyForQuery */) {
          status = String.fromCharCode(fromServer[5]) as WireMessage['status'];
          if (status === 'I') primed = false;
          if (cutting) {
            const { cut, message } = cutting;
            if (cut.thenUnreachable) {
              refusing = true;
              for (const s of sockets) s.destroy();
            }
            closeBoth();
            cut.done(message);
            return;
          }
        }
        fromServer = fromServer.subarray(1 + len);
      }
    });
    client.on('close', closeBoth);
    upstream.on('close', closeBoth);
    client.on('error', closeBoth);
    upstream.on('error', closeBoth);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    messages,
    closed,
    cutAnswerOf: (match, opts = {}) =>
      new Promise<WireMessage>((done) => {
        armed = { match, after: opts.after, thenUnreachable: opts.thenUnreachable ?? false, done };
      }),
    reachable: () => {
      refusing = false;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/**
 * What in a statement text would leave state on a server connection beyond its transaction, or is a
 * SET LOCAL sent outside a transaction (where it does nothing but warn; a simple query's later
 * statements are inside its implicit one): one line per finding.
 */
export function sessionStateFindings(m: WireMessage): string[] {
  const found: string[] = [];
  const where = `connection ${m.connection}, ${m.kind}${m.name ? ` "${m.name}"` : ''}: ${m.text.slice(0, 160)}`;
  if (m.kind === 'parse' && m.name !== '') found.push(`named prepared statement (${where})`);
  // Statement starts: the text's start, or after a semicolon (the service's literals hold none).
  const starts = [...m.text.matchAll(/(?:^|;)\s*([A-Za-z]+(?:\s+[A-Za-z_]+){0,2})/g)];
  for (const s of starts) {
    const words = s[1].toUpperCase().split(/\s+/);
    const [first, second] = words;
    const before = m.text.slice(0, s.index ?? 0).toUpperCase();
    // A simple query of several statements runs them in one implicit transaction: a SET LOCAL holds
    // for the statements after it in the same message (test/idempotency/slot-rows.test.ts shows it).
    const after = m.text.slice((s.index ?? 0) + s[0].length);
    const implicit = m.kind === 'query' && /;\s*[A-Za-z]/.test(after);
    const inTransaction =
      m.status === 'T' || implicit || /(^|;)\s*(BEGIN|START\s+TRANSACTION)\b/.test(before);
    if (first === 'SET') {
      if (second === 'LOCAL' || second === 'TRANSACTION' || second === 'CONSTRAINTS') {
        if (!inTransaction) found.push(`SET ${second} outside a transaction (${where})`);
      } else found.push(`session-level SET (${where})`);
    }
    if (['PREPARE', 'LISTEN', 'DECLARE', 'LOAD'].includes(first)) found.push(`${first} (${where})`);
    if (first === 'CREATE' && /^TEMP/.test(second ?? '')) found.push(`temporary table (${where})`);
  }
  if (/\bpg_(try_)?advisory_lock(_shared)?\s*\(/i.test(m.text))
    found.push(`session advisory lock (${where})`);
  if (/\bset_config\s*\([^)]*,\s*false\s*\)/i.test(m.text)) found.push(`set_config(..., false) (${where})`);
  if (/\bWITH\s+HOLD\b/i.test(m.text)) found.push(`cursor WITH HOLD (${where})`);
  return found;
}
