import pg from 'pg';

/**
 * PostgreSQL's messages as a server with `lc_messages = 'de_DE.UTF-8'` writes them (PostgreSQL 15's
 * de catalogue), for the errors the keyed create can meet. The embedded PostgreSQL of the tests ships
 * no translations (no share/locale) and the machine may have no German locale, so `SET lc_messages`
 * cannot produce them: the driver's errors are rewritten instead, as they arrive, before any code of
 * the service reads them. Only text changes; SQLSTATE, constraint, HINT and the other fields stay.
 */
const GERMAN: Array<[RegExp, string]> = [
  [/PL\/pgSQL function (.+?) line (\d+) at (\S+)/g, 'PL/pgSQL-Funktion $1 Zeile $2 bei $3'],
  [/SQL statement "/g, 'SQL-Anweisung »'],
  [
    /duplicate key value violates unique constraint "([^"]+)"/g,
    'doppelter Schlüsselwert verletzt Unique-Constraint »$1«',
  ],
  [/canceling statement due to lock timeout/g, 'storniere Anfrage wegen Zeitüberschreitung einer Sperre'],
];

function german(text: unknown): unknown {
  if (typeof text !== 'string') return text;
  return GERMAN.reduce((t, [from, to]) => t.replace(from, to), text);
}

const proto = pg.DatabaseError.prototype as object;

/**
 * From now on every DatabaseError's `message` and `where` are German. pg-protocol assigns `where`
 * to each new error after constructing it, so a setter on the prototype sees it; the message is
 * rewritten there too (the constructor has set it by then). Returns the undo.
 */
export function germanMessages(): () => void {
  Object.defineProperty(proto, 'where', {
    configurable: true,
    set(this: Error, value: unknown) {
      this.message = german(this.message) as string;
      Object.defineProperty(this, 'where', {
        value: german(value),
        writable: true,
        enumerable: true,
        configurable: true,
      });
    },
  });
  return () => {
    delete (proto as { where?: unknown }).where;
  };
}

/** Every error that carries no context (`where`) keeps its English message: the check uses one that has. */
export function isGerman(text: string): boolean {
  return (
    /Zeile \d+ bei|verletzt Unique-Constraint|Zeitüberschreitung/.test(text) && !/ line \d+ at /.test(text)
  );
}
