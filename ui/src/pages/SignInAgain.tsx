import { useEffect, useState } from "preact/hooks";
import { S } from "../strings";
import { signInAgain, type FactorStep } from "../lib/login";
import { FactorCard } from "./FactorCard";

/**
 * After a change that ended every session of the user (a second factor added, changed or
 * removed): signs the tab in again as `name` with `password`, through the second step when the
 * user has a factor (the card says why, in `notice`, or `passkeyNotice` when a passkey is
 * offered), then reloads; `onSignedOut` shows the
 * sign-in card when that fails.
 */
export function SignInAgain(props: {
  name: string;
  password: string;
  notice: string;
  passkeyNotice?: string;
  onSignedOut: () => void;
}) {
  const [step, setStep] = useState<FactorStep | null>(null);
  useEffect(() => {
    void signInAgain(props.password, props.name).then((again) => {
      if (again === true) location.reload();
      else if (again) setStep(again);
      else props.onSignedOut();
    });
  }, []);
  if (!step) return <p class="notice" role="status">{S.changeSaved}</p>;
  return (
    <FactorCard embedded factors={step.factors} onRestart={props.onSignedOut}
      notice={step.passkey && props.passkeyNotice ? props.passkeyNotice : props.notice}
      verify={async (code) => {
        await step.verify(code);
        location.reload();
      }}
      passkey={step.passkey ? async () => {
        await step.verifyPasskey();
        location.reload();
      } : undefined} />
  );
}
