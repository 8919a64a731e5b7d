import { A2A_PROTOCOL_VERSION, AgentCard, AgentSkill } from '@a2a-js/sdk';
import { AgentProfile } from '@runledger/contracts';

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
 * it runs) and one per agent it may delegate to, both bindings at this service's own URL, streaming
 * and push notifications, and the bearer tokens every method needs.
 */
export function buildAgentCard(s: AgentCardSource): AgentCard {
  const base = s.baseUrl.replace(/\/+$/, '');
  return {
    name: 'Runledger',
    description:
      'An event-sourced runtime for multi-agent tasks: a message becomes a durable task, planned by an orchestrator, ' +
      'run with sandboxed tools behind a permission service; a permission request is input-required, a secret request auth-required.',
    supportedInterfaces: [
      {
        url: `${base}${A2A_JSONRPC_PATH}`,
        protocolBinding: 'JSONRPC',
        tenant: '',
        protocolVersion: A2A_PROTOCOL_VERSION,
      },
      {
        url: `${base}${A2A_REST_PATH}`,
        protocolBinding: 'HTTP+JSON',
        tenant: '',
        protocolVersion: A2A_PROTOCOL_VERSION,
      },
    ],
    provider: undefined,
    version: s.version,
    documentationUrl: `${base}/docs`,
    capabilities: { streaming: true, pushNotifications: true, extensions: [], extendedAgentCard: false },
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
