// The UI's strings in the chosen language, the choice itself (the browser's languages unless the
// user picked one, remembered in localStorage) and locale-aware formatting of dates and numbers.
// `S` is a live binding: `setLanguage` swaps it and the app re-renders from its root.
import { en, type Key, type Strings } from "./i18n/en";
import { ja } from "./i18n/ja";

/** The languages the UI ships. */
export const LANGUAGES = ["en", "ja"] as const;
/** One of [`LANGUAGES`]. */
export type Lang = (typeof LANGUAGES)[number];
/** Each language's strings. */
export const CATALOGS: Record<Lang, Strings> = { en, ja };
/** Each language's name in that language (the switch shows these). */
export const LANGUAGE_NAMES: Record<Lang, string> = { en: "English", ja: "日本語" };
/** Where the user's choice is remembered. */
export const LANG_KEY = "ichor.lang";

export type { Key, Strings };

/** The strings of the current language. */
export let S: Strings = en;
let current: Lang = "en";

/** The current language. */
export function language(): Lang {
  return current;
}

function asLang(tag: string | null | undefined): Lang | null {
  const primary = (tag ?? "").toLowerCase().split("-")[0];
  return (LANGUAGES as readonly string[]).includes(primary) ? (primary as Lang) : null;
}

/**
 * The language to show: the remembered choice when it is one we ship, else the first of the
 * browser's languages (`navigator.languages`, in preference order) that we ship, else English.
 */
export function pickLanguage(stored: string | null, browser: readonly string[]): Lang {
  const chosen = asLang(stored);
  if (chosen) return chosen;
  for (const tag of browser) {
    const l = asLang(tag);
    if (l) return l;
  }
  return "en";
}

/** Switches the strings and `<html lang>`; `remember` stores the choice for later visits. */
export function setLanguage(lang: Lang, remember = false): void {
  current = lang;
  S = CATALOGS[lang];
  if (typeof document !== "undefined") document.documentElement.lang = lang;
  if (remember && typeof localStorage !== "undefined") {
    try {
      localStorage.setItem(LANG_KEY, lang);
    } catch {
      // Storage refused (private mode quota): the choice lasts for this page only.
    }
  }
}

/** Picks and applies the language at start-up. */
export function initLanguage(): Lang {
  let stored: string | null = null;
  try {
    stored = typeof localStorage === "undefined" ? null : localStorage.getItem(LANG_KEY);
  } catch {
    stored = null;
  }
  const browser = typeof navigator === "undefined" ? [] : navigator.languages ?? [navigator.language];
  const lang = pickLanguage(stored, browser);
  setLanguage(lang);
  return lang;
}

/** A template with `{name}`-style placeholders filled in. */
export function fmt(template: string, values: Record<string, string | number>): string {
  return template.replace(/\{(\w+)\}/g, (m, k: string) => {
    const v = values[k];
    if (v === undefined) return m;
    return typeof v === "number" ? formatNumber(v) : v;
  });
}

/** A number as the current language writes it (grouping separators). */
export function formatNumber(n: number, lang: Lang = current): string {
  return new Intl.NumberFormat(lang).format(n);
}

/** A date and time (milliseconds since the epoch) as the current language writes it. */
export function formatDateTime(ms: number, lang: Lang = current): string {
  return new Intl.DateTimeFormat(lang, { dateStyle: "medium", timeStyle: "short" }).format(new Date(ms));
}

/** A count with its noun (`1 user`, `3 users`), by the language's plural rules. */
export function countOf(n: number, one: string, other: string, lang: Lang = current): string {
  return fmt(new Intl.PluralRules(lang).select(n) === "one" ? one : other, { count: n });
}

/**
 * A message to show, kept as its key and values so that it is rendered in the language current
 * at render time (switching the language re-translates errors already on screen).
 */
export interface Msg {
  key: Key;
  values?: Record<string, string | number>;
}

/** A message by key. */
export function msg(key: Key, values?: Record<string, string | number>): Msg {
  return { key, values };
}

/** The text of a message in the current language. */
export function t(m: Msg): string {
  return m.values ? fmt(S[m.key], m.values) : S[m.key];
}
