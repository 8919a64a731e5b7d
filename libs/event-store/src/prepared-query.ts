import { Compilable, CompiledQuery, Kysely, QueryResult } from 'kysely';

interface Prepared<R> {
  compiled: CompiledQuery<R>;
  /** for each bound parameter, the value's name, or null for a value built in */
  slots: (string | null)[];
}

/**
 * A kysely query built and compiled once per database handle (and shape), then run with each call's
 * values bound in their places: building and compiling a small query costs several times what SQLite
 * spends running it, and the log's hot paths (a stream's version, its events, a task's lease, a
 * checkpoint) run the same few queries for every task. `build` receives a stand-in for each value and
 * must pass each only as a plain value (kysely binds it as a parameter, in the place it compiles to);
 * what else it builds in stays as compiled. A query whose form depends on the values (an optional
 * clause) names each form by `shape`.
 */
export class PreparedQuery<DB, V extends Record<string, unknown>, R> {
  private readonly prepared = new WeakMap<Kysely<DB>, Map<string, Prepared<R>>>();

  constructor(
    private readonly names: readonly (keyof V & string)[],
    private readonly build: (db: Kysely<DB>, values: V, shape: string) => Compilable<R>,
  ) {}

  execute(db: Kysely<DB>, values: V, shape = ''): Promise<QueryResult<R>> {
    const { compiled, slots } = this.prepare(db, shape);
    const parameters = compiled.parameters.map((p, i) => {
      const name = slots[i];
      return name === null ? p : values[name];
    });
    return db.executeQuery<R>({ ...compiled, parameters });
  }

  /** The first row, as executeTakeFirst answers it. */
  async first(db: Kysely<DB>, values: V, shape = ''): Promise<R | undefined> {
    return (await this.execute(db, values, shape)).rows[0];
  }

  private prepare(db: Kysely<DB>, shape: string): Prepared<R> {
    let shapes = this.prepared.get(db);
    if (!shapes) this.prepared.set(db, (shapes = new Map()));
    let prepared = shapes.get(shape);
    if (!prepared) {
      const standIns = new Map(this.names.map((name) => [Object.freeze({ boundValue: name }), name]));
      const values = Object.fromEntries([...standIns].map(([standIn, name]) => [name, standIn])) as V;
      const compiled = this.build(db, values, shape).compile();
      const slots = compiled.parameters.map((p) => standIns.get(p as never) ?? null);
      // a stand-in kysely did not bind would be in the text as "[object Object]"
      if (compiled.sql.includes(String({})))
        throw new Error(`prepared query: a value is not bound as a parameter in ${compiled.sql}`);
      prepared = { compiled, slots };
      shapes.set(shape, prepared);
    }
    return prepared;
  }
}
