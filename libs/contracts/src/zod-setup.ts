import { z } from 'zod';

/**
 * zod parses without generating a parser per schema. Measured on the log's own event mix (the 42
 * payloads of a 7-step task, each type parsed once to seven times a task): 30-35% less CPU than with
 * a generated parser per schema, from the first tasks (the generated ones are each cold, compiled
 * and optimized apart) to steady state after 1,500 tasks. Only a single schema parsed in a hot loop
 * is faster generated (about 0.3 us a parse). Set before any schema here is built: a schema reads it
 * when it is created.
 */
z.config({ jitless: true });
