import { useEffect, useRef, useState } from "preact/hooks";
import { S, fmt, formatDateTime, type Key } from "../strings";
import { recoveryCodesFile } from "../lib/ownFactors";

/**
 * Saves `text` as the file `filename` (a Blob URL, revoked once the download started), through
 * a link placed in `within` (the open modal dialog: the page behind it is inert).
 */
function saveText(filename: string, text: string, within: HTMLElement): void {
  const url = URL.createObjectURL(new Blob([text], { type: "text/plain;charset=utf-8" }));
  const a = document.createElement("a");
  a.href = url;
  a.download = filename;
  within.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/**
 * The new recovery codes of `name`, shown this once in a modal dialog with copy and download.
 * The heading takes the focus when it opens (the dialog is read from its start); it closes by
 * its button only, not by Escape, since nothing brings the codes back; `onDone` follows.
 */
export function RecoveryCodes(props: { name: string; codes: readonly string[]; onDone: () => void }) {
  const dialog = useRef<HTMLDialogElement>(null);
  const heading = useRef<HTMLHeadingElement>(null);
  const [status, setStatus] = useState<Key | null>(null);
  const [made] = useState(() => Date.now());

  useEffect(() => {
    const d = dialog.current;
    if (d && !d.open) d.showModal();
    heading.current?.focus();
  }, []);

  const copy = async () => {
    try {
      await navigator.clipboard.writeText(props.codes.join("\n"));
      setStatus("copied");
    } catch {
      setStatus("copyFailed");
    }
  };
  const download = () => {
    const header = fmt(S.recoveryFileHeader, { name: props.name, time: formatDateTime(made) });
    const file = recoveryCodesFile(props.name, location.origin, props.codes, header);
    saveText(file.filename, file.text, dialog.current ?? document.body);
  };
  const done = () => {
    dialog.current?.close();
    props.onDone();
  };

  return (
    <dialog ref={dialog} class="codes-dialog" aria-labelledby="codes-title" aria-describedby="codes-once"
      data-testid="recovery-codes" onCancel={(e) => e.preventDefault()}>
      <h2 id="codes-title" ref={heading} tabIndex={-1}>{S.recoveryTitle}</h2>
      <p class="warning" id="codes-once">{S.recoveryOnce}</p>
      <p>{S.recoveryText}</p>
      <ol class="codes">
        {props.codes.map((c) => <li key={c}><code>{c}</code></li>)}
      </ol>
      <div class="buttons">
        <button type="button" onClick={copy}>{S.copyCodes}</button>
        <button type="button" onClick={download}>{S.downloadCodes}</button>
      </div>
      <p class={status === "copyFailed" ? "error" : "notice"} role="status">{status ? S[status] : ""}</p>
      <button type="button" class="primary" onClick={done}>{S.savedCodes}</button>
    </dialog>
  );
}
