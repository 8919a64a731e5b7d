import { Module } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '../config';
import { TRACE_EXPORT_OPTIONS, TraceExportOptions, TraceExportService } from './trace-export.service';

/**
 * Where OTLP/HTTP traces go, by the OpenTelemetry variables' rules: the traces endpoint as is,
 * else <OTEL_EXPORTER_OTLP_ENDPOINT>/v1/traces; null (tracing off) when neither is set or the SDK
 * is disabled.
 */
export function otlpTracesUrl(c: AppConfig): string | null {
  if (c.OTEL_SDK_DISABLED) return null;
  if (c.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) return c.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
  if (!c.OTEL_EXPORTER_OTLP_ENDPOINT) return null;
  return `${c.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/+$/, '')}/v1/traces`;
}

/** The exporter's options from the config; the exporter reads its other OTEL_EXPORTER_OTLP_* variables (headers, timeout) itself. */
export function traceExportOptionsFromConfig(c: AppConfig): TraceExportOptions | null {
  const url = otlpTracesUrl(c);
  if (!url) return null;
  // required here, where traces are exported: the exporter and its encoders take a tenth of every
  // CLI command's start, and most processes export nothing
  const { OTLPTraceExporter } =
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    require('@opentelemetry/exporter-trace-otlp-http') as typeof import('@opentelemetry/exporter-trace-otlp-http');
  return {
    // OTLP/HTTP with JSON bodies (this package's encoding)
    exporter: new OTLPTraceExporter({ url }),
    serviceName: c.OTEL_SERVICE_NAME,
    captureContent: c.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT,
    scheduledDelayMillis: c.OTEL_BSP_SCHEDULE_DELAY,
  };
}

/** OpenTelemetry GenAI traces of finished tasks, exported over OTLP/HTTP when an endpoint is configured. */
@Module({
  providers: [
    { provide: TRACE_EXPORT_OPTIONS, useFactory: traceExportOptionsFromConfig, inject: [APP_CONFIG] },
    TraceExportService,
  ],
  exports: [TraceExportService],
})
export class TelemetryModule {}
