import { DynamicModule, Module } from '@nestjs/common';
import { ModuleAsyncOptions } from '@runledger/contracts';
import { PermissionService } from './permission-service';
import { RulePermissionPolicy, RulePermissionPolicyOptions } from './rule-permission-policy';

/** PermissionService: the rule table (built-in rules plus RUNLEDGER_PERMISSION_RULES) over the allowed root. */
@Module({})
export class PermissionsModule {
  static forRootAsync(options: ModuleAsyncOptions<RulePermissionPolicyOptions>): DynamicModule {
    return {
      module: PermissionsModule,
      global: true,
      imports: options.imports ?? [],
      providers: [
        {
          provide: PermissionService,
          useFactory: async (...args: unknown[]) =>
            new RulePermissionPolicy(await options.useFactory(...args)),
          inject: options.inject ?? [],
        },
      ],
      exports: [PermissionService],
    };
  }
}
