/**
 * Berth's mail (invitations), through nodemailer to the server BERTH_SMTP_URL names. A mail that cannot be
 * sent is logged and reported to the inviter (`mailed: false`): the link they were shown still works.
 * @module
 */
import type { Transporter } from 'nodemailer';
import type { Logger } from 'pino';

export interface Mailer {
  /** Mails an invitation link; false when it could not be sent. */
  invite(to: string, link: string, invitedBy: string | null): Promise<boolean>;
  close(): void;
}

export function smtpMailer(url: string, from: string, logger: Logger): Mailer {
  // nodemailer (~23 MB) is loaded by the first invitation, not at start: most servers seldom mail.
  let transport: Promise<Transporter> | undefined;
  let made: Transporter | undefined;
  const transporter = () => {
    transport ??= import('nodemailer').then(({ default: nodemailer }) => {
      made = nodemailer.createTransport(url);
      return made;
    });
    return transport;
  };
  return {
    async invite(to, link, invitedBy) {
      const by = invitedBy ? `${invitedBy} invited you` : 'You are invited';
      try {
        await (await transporter()).sendMail({
          from,
          to,
          subject: 'You are invited to Berth',
          text: `${by} to Berth. Accept within a week, once, at:\n\n${link}\n`,
        });
        return true;
      } catch (error) {
        logger.warn({ err: error, to }, 'could not mail an invitation');
        return false;
      }
    },
    close() {
      made?.close();
    },
  };
}
