import { z } from 'zod';

export const SCOPES = ['tasks:read', 'tasks:write', 'approvals', 'admin'] as const;
export const Scope = z.enum(SCOPES);
export type Scope = z.infer<typeof Scope>;

/** `admin` implies every other scope. */
export const hasScope = (granted: readonly Scope[], needed: Scope): boolean =>
  granted.includes('admin') || granted.includes(needed);

/** Who made the request, attached to the request by the auth guard. Never carries the token. */
export interface Principal {
  name: string;
  scopes: readonly Scope[];
}
