//! A mail as the tools take it, built by `lettre`: its header fields
//! (folded as RFC 5322 has it), its Message-ID, its `Date:`, the text sent
//! as written (8bit), and the files attached after it.

use anyhow::{Context, Result};

use crate::results::session::Session;

/// The `From:` of a session that recorded nobody (no `git config user.name`
/// and `user.email` in the checkout that ran it): to be replaced.
pub const PLACEHOLDER_FROM: &str =
    "REPLACE WITH YOUR NAME <replace.with.your.address@example.invalid>";

/// The Message-ID of the mail about `what` (`report`, or the variant under
/// test) of `session`, without angle brackets: from the session's start, at
/// the reporter's mail domain.
pub fn message_id(session: &Session, what: &str) -> String {
    let domain = (session.reporter.as_deref())
        .and_then(|r| r.rsplit_once('@'))
        .map(|(_, d)| d.trim_end_matches('>').to_string())
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| "wbstall.invalid".to_string());
    format!("wbstall-{}-{what}@{domain}", session.started.compact())
}

/// A file sent with a mail (a kernel's `.config`): its name and text.
#[derive(Debug, Clone, PartialEq)]
pub struct Attachment {
    pub name: String,
    pub text: String,
}

/// Whom a mail goes to and what it answers.
#[derive(Debug, Default)]
pub struct Envelope {
    /// What it is about (`report`, a variant): names its Message-ID.
    pub what: String,
    pub subject: String,
    pub to: Vec<String>,
    pub cc: Vec<String>,
    /// The Message-Id it answers (In-Reply-To, References).
    pub reply_to: Option<String>,
}

fn mailbox(address: &str) -> Result<lettre::message::Mailbox> {
    address
        .parse()
        .with_context(|| format!("`{address}` is not a mail address (Name <user@host>)"))
}

/// The whole mail: `From:` (the session's reporter, else
/// [`PLACEHOLDER_FROM`]), `Date:` (when the session started), the envelope's
/// fields, then `body` as UTF-8 text sent as it is (8bit), and the
/// attachments after it as parts of their own (text/plain).
pub fn message(
    session: &Session,
    e: &Envelope,
    body: &str,
    attachments: &[Attachment],
) -> Result<String> {
    use lettre::message::{header, MultiPart, SinglePart};
    let date = session.started;
    let id = message_id(session, &e.what);
    let mut m = lettre::Message::builder()
        .from(mailbox(
            session.reporter.as_deref().unwrap_or(PLACEHOLDER_FROM),
        )?)
        .date(
            std::time::UNIX_EPOCH
                + std::time::Duration::from_secs(
                    u64::try_from(date.unix_seconds())
                        .context("session.json's start time (`started`) is before 1970")?,
                ),
        )
        .message_id(Some(format!("<{id}>")))
        .subject(e.subject.as_str());
    for to in &e.to {
        m = m.to(mailbox(to)?);
    }
    for cc in &e.cc {
        m = m.cc(mailbox(cc)?);
    }
    if e.to.is_empty() && e.cc.is_empty() {
        // lettre builds only what it could send: a report to post names its
        // recipients when it is sent, so its envelope (never written) is From.
        let from = mailbox(session.reporter.as_deref().unwrap_or(PLACEHOLDER_FROM))?;
        let envelope = lettre::address::Envelope::new(Some(from.email.clone()), vec![from.email])
            .context("the mail's envelope")?;
        m = m.envelope(envelope);
    }
    if let Some(r) = &e.reply_to {
        m = m.in_reply_to(format!("<{r}>")).references(format!("<{r}>"));
    }
    // 8bit as RFC 2045 has it (lines of at most 998 octets): lettre would
    // take a line of 76 octets (72 columns and a `±`) for quoted-printable.
    if let Some(l) = body.lines().find(|l| l.len() > 998) {
        anyhow::bail!("a line of the mail is over 998 octets: {l}");
    }
    let crlf: String = body.lines().map(|l| format!("{l}\r\n")).collect();
    let text = SinglePart::builder()
        .header(header::ContentType::TEXT_PLAIN)
        .body(lettre::message::Body::dangerous_pre_encoded(
            crlf.into_bytes(),
            header::ContentTransferEncoding::EightBit,
        ));
    let m = if attachments.is_empty() {
        m.singlepart(text)
    } else {
        // A boundary of the mail's own: the same session renders the same mail.
        let boundary = format!("wbstall-{}", &crate::util::sha256_hex(id.as_bytes())[..24]);
        let mut parts = MultiPart::mixed().boundary(boundary).singlepart(text);
        for a in attachments {
            let kind = header::ContentType::parse("text/plain; charset=utf-8")
                .context("the attachments' content type")?;
            parts = parts.singlepart(
                lettre::message::Attachment::new(a.name.clone()).body(a.text.clone(), kind),
            );
        }
        m.multipart(parts)
    }
    .context("building the mail")?;
    // A file on disk ends its lines as git send-email and git am read them.
    let text = String::from_utf8(m.formatted()).context("the mail is not UTF-8")?;
    Ok(text.replace("\r\n", "\n"))
}

/// Each distinct kernel configuration of `variants`, attached when the
/// results directory kept it (`configs`: each variant's `.config` text).
pub fn config_attachments(
    session: &Session,
    variants: &[&str],
    configs: &std::collections::BTreeMap<String, String>,
) -> Vec<Attachment> {
    let mut out: Vec<(String, Attachment)> = Vec::new();
    for v in (session.variants.iter()).filter(|v| variants.contains(&v.variant.as_str())) {
        if out.iter().any(|(sha, _)| *sha == v.config_sha256) {
            continue;
        }
        if let Some(text) = configs.get(&v.variant) {
            let one = (session.variants.iter()).all(|o| o.config_sha256 == v.config_sha256);
            let name = if one {
                format!("config-{}", v.kernel_release)
            } else {
                format!("config-{}-{}", v.kernel_release, v.variant)
            };
            out.push((
                v.config_sha256.clone(),
                Attachment {
                    name,
                    text: text.clone(),
                },
            ));
        }
    }
    out.into_iter().map(|(_, a)| a).collect()
}
