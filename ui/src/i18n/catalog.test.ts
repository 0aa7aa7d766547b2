import { describe, expect, it } from "vitest";
import { en } from "./en";
import { ja } from "./ja";
import { CATALOGS, LANGUAGES, countOf, fmt, formatDateTime, formatNumber, pickLanguage } from "../strings";

const placeholders = (s: string) => [...s.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort();

describe("the string catalogs", () => {
  it("have the same keys in every language", () => {
    const keys = Object.keys(en).sort();
    for (const lang of LANGUAGES) {
      expect(Object.keys(CATALOGS[lang]).sort(), lang).toEqual(keys);
    }
  });

  it("have no empty string and the same placeholders as English", () => {
    for (const lang of LANGUAGES) {
      for (const [k, v] of Object.entries(CATALOGS[lang])) {
        expect(v.trim(), `${lang}.${k}`).not.toBe("");
        expect(placeholders(v), `${lang}.${k}`).toEqual(placeholders(en[k as keyof typeof en]));
      }
    }
  });

  it("translate every sentence into Japanese (no English left apart from names)", () => {
    const untranslated = Object.entries(ja).filter(([k, v]) => v === en[k as keyof typeof en] && !/^\{\w+\}$|^Ichor$/.test(v));
    expect(untranslated).toEqual([]);
    // Japanese text uses kana or kanji in every entry apart from the product name and bare placeholders.
    const noJapanese = Object.entries(ja).filter(([, v]) => !/[\u3000-\u30ff\u4e00-\u9fff\uff00-\uffef]/.test(v) && !/^\{\w+\}$|^Ichor$/.test(v));
    expect(noJapanese).toEqual([]);
  });
});

describe("the language choice", () => {
  it("takes a remembered choice first", () => {
    expect(pickLanguage("ja", ["en-US"])).toBe("ja");
    expect(pickLanguage("en", ["ja-JP"])).toBe("en");
  });
  it("takes the first shipped browser language, in preference order", () => {
    expect(pickLanguage(null, ["fr-FR", "ja-JP", "en-US"])).toBe("ja");
    expect(pickLanguage(null, ["en-GB", "ja"])).toBe("en");
    expect(pickLanguage("xx", ["JA"])).toBe("ja");
  });
  it("falls back to English", () => {
    expect(pickLanguage(null, [])).toBe("en");
    expect(pickLanguage(null, ["de", "fr"])).toBe("en");
  });
});

describe("locale formatting", () => {
  it("formats numbers and counts for the language", () => {
    expect(formatNumber(12345, "en")).toBe("12,345");
    expect(formatNumber(12345, "ja")).toBe("12,345");
    expect(countOf(1, en.userCountOne, en.userCountOther, "en")).toBe("1 user");
    expect(countOf(2, en.userCountOne, en.userCountOther, "en")).toBe("2 users");
    expect(countOf(1, ja.userCountOne, ja.userCountOther, "ja")).toBe("ユーザー 1 人");
  });
  it("formats dates for the language", () => {
    const t = Date.UTC(2026, 11, 3, 13, 5);
    expect(formatDateTime(t, "ja")).toMatch(/2026\/12\/0?[34]/);
    expect(formatDateTime(t, "en")).toMatch(/Dec [34], 2026/);
  });
  it("fills placeholders, numbers as the language writes them", () => {
    expect(fmt("{a} and {b}, {c}", { a: "x", b: 1500 })).toBe("x and 1,500, {c}");
  });
});
