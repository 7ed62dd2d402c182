import { useState } from 'react';
import type { TSchema } from 'typebox';
import { type FieldErrors, validate } from './validation';

/** A form's per-field messages, with the check against the API's request schema that runs before sending. */
export function useFieldErrors(schema: TSchema) {
  const [errors, setErrors] = useState<FieldErrors>({});
  /** Shows the problems of `body` (and any the form finds itself) beside their fields; true when there are none. */
  const check = (body: unknown, extra: FieldErrors = {}): boolean => {
    const found = { ...validate(schema, body), ...extra };
    setErrors(found);
    return Object.keys(found).length === 0;
  };
  return { errors, setErrors, check };
}

/** A form of text values checked like `useFieldErrors`; `bind(name)` gives an InputField its value and message. */
export function useForm<V extends Record<string, string>>(schema: TSchema, initial: V | (() => V)) {
  const [values, setValues] = useState(initial);
  const fieldErrors = useFieldErrors(schema);
  const set = (name: keyof V, value: string) => setValues((current) => ({ ...current, [name]: value }));
  /** `errorKey` is the API's name for the field when the form keeps the value under another one. */
  const bind = (name: keyof V & string, errorKey: string = name) => ({
    value: values[name],
    onChange: (value: string) => set(name, value),
    error: fieldErrors.errors[errorKey],
  });
  return { ...fieldErrors, values, setValues, set, bind };
}
