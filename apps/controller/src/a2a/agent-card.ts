import { A2A_PROTOCOL_VERSION, AgentCard, AgentSkill } from '@a2a-js/sdk';
import { A2A_LEGACY_PROTOCOL_VERSION } from '@a2a-js/sdk/compat/v0_3';
import { AgentProfile, ToolManifest } from '@runledger/contracts';

export const A2A_JSONRPC_PATH = '/a2a/jsonrpc';
export const A2A_REST_PATH = '/a2a/rest';
export const AGENT_CARD_ROUTE = '.well-known/agent-card.json';

export interface AgentCardSource {
  /** where other agents reach this service, without a trailing slash */
  baseUrl: string;
  version: string;
  /** the orchestrator's model (what answers a message); the agents it may delegate to */
  orchestratorModel: string;
  agents: readonly AgentProfile[];
}

const skillOf = (a: AgentProfile): AgentSkill => ({
  id: `agent:${a.name}`,
  name: a.name,
  description: `Delegated by the orchestrator: ${a.description}`,
  tags: ['agent', a.name],
  examples: [],
  inputModes: ['text/plain'],
  outputModes: ['text/plain'],
  securityRequirements: [],
});

/**
 * The card other agents discover Runledger by: one skill for the orchestrator (a message is a task
 * it runs) and one per agent it may delegate to, both bindings at this service's own URL (A2A 1.0,
 * and 0.3 for older clients), streaming, push notifications, an extended card for callers with a
 * token, and the bearer tokens every method needs.
 */
export function buildAgentCard(s: AgentCardSource): AgentCard {
  const base = s.baseUrl.replace(/\/+$/, '');
  return {
    name: 'Runledger',
    description:
      'An event-sourced runtime for multi-agent tasks: a message becomes a durable task, planned by an orchestrator, ' +
      'run with sandboxed tools behind a permission service; a permission request is input-required, a secret request auth-required.',
    // 1.0 first; the same endpoints answer 0.3 clients (no A2A-Version header, or 0.3) through the SDK's compat layer
    supportedInterfaces: [A2A_PROTOCOL_VERSION, A2A_LEGACY_PROTOCOL_VERSION].flatMap((protocolVersion) => [
      { url: `${base}${A2A_JSONRPC_PATH}`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion },
      { url: `${base}${A2A_REST_PATH}`, protocolBinding: 'HTTP+JSON', tenant: '', protocolVersion },
    ]),
    provider: undefined,
    version: s.version,
    documentationUrl: `${base}/docs`,
    capabilities: { streaming: true, pushNotifications: true, extensions: [], extendedAgentCard: true },
    securitySchemes: {
      bearer: {
        scheme: {
          $case: 'httpAuthSecurityScheme',
          value: {
            description:
              'A Runledger bearer token: tasks:write to send messages, tasks:read to read and subscribe, approvals to answer input-required and auth-required',
            scheme: 'Bearer',
            bearerFormat: '',
          },
        },
      },
    },
    securityRequirements: [{ schemes: { bearer: { list: [] } } }],
    defaultInputModes: ['text/plain', 'application/json'],
    defaultOutputModes: ['text/plain'],
    skills: [
      {
        id: 'orchestrator',
        name: 'orchestrator',
        description: `Runs the message as a task: the orchestrator (${s.orchestratorModel}) plans, calls tools and agents, and answers.`,
        tags: ['tasks', 'tools', 'planning'],
        examples: ['run echo hello', 'write a file notes.txt with a summary of README.md'],
        inputModes: ['text/plain', 'application/json'],
        outputModes: ['text/plain'],
        securityRequirements: [],
      },
      ...s.agents.map(skillOf),
    ],
    signatures: [],
  };
}

/** Whether an `A2A-Version` asks for the 0.3 protocol: absent (the spec reads it so) or 0.x. */
export const isLegacyA2AVersion = (version: string | undefined): boolean =>
  version === undefined || version.trim() === '' || /^0\.\d+$/.test(version.trim());

/**
 * The card a caller with a token gets (GetExtendedAgentCard): the public card, plus a skill per tool
 * the orchestrator may call, and what the caller's own token lets it do.
 */
export function buildExtendedAgentCard(
  card: AgentCard,
  tools: readonly ToolManifest[],
  caller: { name: string; scopes: readonly string[] },
): AgentCard {
  const toolSkills: AgentSkill[] = [...tools]
    .sort((a, b) => a.name.localeCompare(b.name))
    .map((t) => ({
      id: `tool:${t.name}`,
      name: t.name,
      description: `A tool the orchestrator and its agents may call (behind the permission service): ${t.description}`,
      tags: ['tool', t.name],
      examples: [],
      inputModes: ['application/json'],
      outputModes: ['text/plain'],
      securityRequirements: [],
    }));
  return {
    ...card,
    description: `${card.description} This card is for ${caller.name}, whose token has the scopes ${caller.scopes.join(', ')}.`,
    skills: [...card.skills, ...toolSkills],
  };
}
