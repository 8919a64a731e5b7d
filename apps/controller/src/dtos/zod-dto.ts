import { createZodDto as createNestZodDto } from 'nestjs-zod';

type PropertyMetadata = Record<string, unknown>;
type MetadataFactory = () => Record<string, PropertyMetadata>;

/**
 * zod writes a nullable scalar as `type: ['string', 'null']`, which JSON Schema
 * means and @nestjs/swagger misreads as "an array of string" for a DTO's own
 * properties: the same property as `anyOf` keeps its meaning in the document.
 */
function nullableAsAnyOf(properties: Record<string, PropertyMetadata>): Record<string, PropertyMetadata> {
  return Object.fromEntries(
    Object.entries(properties).map(([name, property]) =>
      Array.isArray(property.type)
        ? [name, { ...property, type: '', anyOf: property.type.map((type: unknown) => ({ type })) }]
        : [name, property],
    ),
  );
}

function documentedTruly<Dto extends object>(dto: Dto): Dto {
  const statics = dto as Dto & { _OPENAPI_METADATA_FACTORY?: MetadataFactory };
  const factory = statics._OPENAPI_METADATA_FACTORY;
  if (factory)
    Object.defineProperty(dto, '_OPENAPI_METADATA_FACTORY', {
      value(this: Dto) {
        return nullableAsAnyOf(factory.call(this));
      },
    });
  const output = Object.getOwnPropertyDescriptor(dto, 'Output')?.get;
  if (output)
    Object.defineProperty(dto, 'Output', {
      get(this: Dto) {
        return documentedTruly(output.call(this) as object);
      },
    });
  return dto;
}

/**
 * nestjs-zod's createZodDto, with nullable properties documented as nullable
 * (see nullableAsAnyOf). Every DTO of the app is made with this one.
 */
export const createZodDto: typeof createNestZodDto = (schema, options) =>
  documentedTruly(createNestZodDto(schema, options));
