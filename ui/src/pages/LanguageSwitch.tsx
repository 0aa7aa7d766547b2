import { LANGUAGES, LANGUAGE_NAMES, S, language, setLanguage, type Lang } from "../strings";

/**
 * The language switch: a labelled select listing each language in its own language. The choice
 * is remembered (localStorage) and `onChange` re-renders the app.
 */
export function LanguageSwitch(props: { onChange: (lang: Lang) => void }) {
  return (
    <label class="lang">
      <span>{S.language}</span>
      <select name="language" value={language()}
        onChange={(e) => {
          const lang = (e.target as HTMLSelectElement).value as Lang;
          setLanguage(lang, true);
          props.onChange(lang);
        }}>
        {LANGUAGES.map((l) => (
          <option key={l} value={l} lang={l}>{LANGUAGE_NAMES[l]}</option>
        ))}
      </select>
    </label>
  );
}
