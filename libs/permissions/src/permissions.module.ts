import { DynamicModule, Module } from '@nestjs/common';
import { ModuleAsyncOptions, forRootAsyncModule } from '@runledger/contracts';
import { PermissionService } from './permission-service';
import { RulePermissionPolicy, RulePermissionPolicyOptions } from './rule-permission-policy';

/** PermissionService: the rule table (built-in rules plus RUNLEDGER_PERMISSION_RULES) over the allowed root. */
@Module({})
export class PermissionsModule {
  static forRootAsync(options: ModuleAsyncOptions<RulePermissionPolicyOptions>): DynamicModule {
    return forRootAsyncModule(PermissionsModule, options, {
      provide: PermissionService,
      build: (o) => new RulePermissionPolicy(o),
      exports: [PermissionService],
    });
  }
}
