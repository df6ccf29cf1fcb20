/**
 * Berth's mail (invitations), through nodemailer to the server BERTH_SMTP_URL names. A mail that cannot be
 * sent is logged and reported to the inviter (`mailed: false`): the link they were shown still works.
 * @module
 */
import nodemailer from 'nodemailer';
import type { Logger } from 'pino';

export interface Mailer {
  /** Mails an invitation link; false when it could not be sent. */
  invite(to: string, link: string, invitedBy: string | null): Promise<boolean>;
  close(): void;
}

export function smtpMailer(url: string, from: string, logger: Logger): Mailer {
  const transport = nodemailer.createTransport(url);
  return {
    async invite(to, link, invitedBy) {
      const by = invitedBy ? `${invitedBy} invited you` : 'You are invited';
      try {
        await transport.sendMail({
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
      transport.close();
    },
  };
}
