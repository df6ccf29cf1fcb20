import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import type Docker from 'dockerode';

/**
 * The image of Berth's network sandboxes (docker/sandboxes.ts), made by Berth itself: one static
 * "pause" program, which only holds the namespace, in an image `docker import`ed from a tar made here.
 * No compiler, no download: the program is a few dozen bytes of machine code per architecture, in an
 * ELF file written below. The Engine offers nothing that would do (`HostConfig.Init` injects an init
 * that needs a program to run under it).
 *
 * The program blocks SIGINT and SIGTERM, waits for one with rt_sigtimedwait and exits 0. Waiting for a
 * blocked signal instead of installing a handler needs no signal trampoline, and it works as PID 1,
 * which the kernel otherwise spares the default action of a signal. A wait an unrelated interruption
 * ends (a negative result) waits again.
 * @module
 */

/**
 * x86_64 (Linux syscalls: rt_sigprocmask 14, rt_sigtimedwait 128, exit_group 231). The signals waited
 * for are the sigset 0x4002: SIGINT (2) and SIGTERM (15), bit n-1 each; both programs put it on the
 * stack and pass its address.
 */
// biome-ignore format: one instruction per line
const X86_64 = [
  0x68, 0x02, 0x40, 0x00, 0x00, // push 0x4002            the sigset, at rsp
  0x31, 0xff, //                   xor edi, edi           how = SIG_BLOCK
  0x48, 0x89, 0xe6, //             mov rsi, rsp           set
  0x31, 0xd2, //                   xor edx, edx           old set: none
  0x41, 0xba, 0x08, 0x00, 0x00, 0x00, // mov r10d, 8      sigset size
  0xb8, 0x0e, 0x00, 0x00, 0x00, // mov eax, 14            rt_sigprocmask
  0x0f, 0x05, //                   syscall
  0x48, 0x89, 0xe7, //             wait: mov rdi, rsp     set
  0x31, 0xf6, //                   xor esi, esi           info: none
  0x31, 0xd2, //                   xor edx, edx           timeout: none
  0x41, 0xba, 0x08, 0x00, 0x00, 0x00, // mov r10d, 8      sigset size
  0xb8, 0x80, 0x00, 0x00, 0x00, // mov eax, 128           rt_sigtimedwait
  0x0f, 0x05, //                   syscall
  0x48, 0x85, 0xc0, //             test rax, rax
  0x78, 0xe7, //                   js wait                interrupted: wait again
  0x31, 0xff, //                   xor edi, edi           status 0
  0xb8, 0xe7, 0x00, 0x00, 0x00, // mov eax, 231           exit_group
  0x0f, 0x05, //                   syscall
];

/** aarch64, one 32-bit little-endian word per instruction (syscalls: 135, 137, exit_group 94). */
// biome-ignore format: one instruction per line
const AARCH64 = words([
  0xd2880040, // movz x0, #0x4002
  0xf81f0fe0, // str x0, [sp, #-16]!      the sigset, at sp
  0x910003e1, // mov x1, sp               set
  0xd2800000, // movz x0, #0              how = SIG_BLOCK
  0xd2800002, // movz x2, #0              old set: none
  0xd2800103, // movz x3, #8              sigset size
  0xd28010e8, // movz x8, #135            rt_sigprocmask
  0xd4000001, // svc #0
  0x910003e0, // wait: mov x0, sp         set
  0xd2800001, // movz x1, #0              info: none
  0xd2800002, // movz x2, #0              timeout: none
  0xd2800103, // movz x3, #8              sigset size
  0xd2801128, // movz x8, #137            rt_sigtimedwait
  0xd4000001, // svc #0
  0xb7ffff40, // tbnz x0, #63, wait       interrupted (negative): wait again (-6 instructions)
  0xd2800000, // movz x0, #0              status 0
  0xd2800bc8, // movz x8, #94             exit_group
  0xd4000001, // svc #0
]);

/** By the Engine's `Architecture` (`docker info`): the ELF machine number and the code. */
const PROGRAMS: Record<string, { machine: number; code: number[] }> = {
  x86_64: { machine: 62, code: X86_64 },
  aarch64: { machine: 183, code: AARCH64 },
};

/** The repository the image is tagged in; its tag is a hash of its content. */
export const PAUSE_REPOSITORY = 'berth/sandbox';
/** Where the program is in the image, and the command a sandbox runs. */
export const PAUSE_COMMAND = ['/pause'];

/** Whether Berth can make the image for an Engine of this architecture. */
export function pauseSupported(architecture: string): boolean {
  return architecture in PROGRAMS;
}

/** The image's tar (one file, `pause`, mode 755) for an architecture it supports. */
export function pauseTar(architecture: string): Buffer {
  const program = PROGRAMS[architecture];
  if (!program) throw new Error(`no pause program for ${architecture}`);
  return tar('pause', elf(program.machine, program.code));
}

/**
 * The image's reference, `berth/sandbox:<hash>`, imported first when the Engine lacks it; null on an
 * architecture Berth has no program for.
 */
export async function ensurePauseImage(docker: Docker, architecture: string): Promise<string | null> {
  if (!pauseSupported(architecture)) return null;
  const archive = pauseTar(architecture);
  const tag = createHash('sha256').update(archive).digest('hex').slice(0, 16);
  const reference = `${PAUSE_REPOSITORY}:${tag}`;
  const present = await docker
    .getImage(reference)
    .inspect()
    .then(() => true)
    .catch(() => false);
  if (present) return reference;
  const progress = await docker.importImage(Readable.from([archive]), { repo: PAUSE_REPOSITORY, tag });
  // The Engine reports a failed import in the stream, not in the status.
  await new Promise<void>((resolve, reject) =>
    docker.modem.followProgress(progress, (err: Error | null, output: { error?: string }[]) => {
      const failed = err ?? output.find((o) => o.error);
      if (failed) reject(failed instanceof Error ? failed : new Error(failed.error));
      else resolve();
    }),
  );
  return reference;
}

/** Where the one segment is loaded: a multiple of the largest page size (64 KiB on aarch64). */
const BASE = 0x400000;
const ELF_HEADER = 64;
const PROGRAM_HEADER = 56;

/** A static ELF64 executable: the header, one loadable segment (the whole file) and the code after them. */
function elf(machine: number, code: number[]): Buffer {
  const start = ELF_HEADER + PROGRAM_HEADER;
  const file = Buffer.alloc(start + code.length);
  file.set([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1], 0); // magic, 64-bit, little-endian, version 1
  file.writeUInt16LE(2, 16); // e_type: executable
  file.writeUInt16LE(machine, 18);
  file.writeUInt32LE(1, 20); // e_version
  file.writeBigUInt64LE(BigInt(BASE + start), 24); // e_entry: the code
  file.writeBigUInt64LE(BigInt(ELF_HEADER), 32); // e_phoff
  file.writeUInt16LE(ELF_HEADER, 52); // e_ehsize
  file.writeUInt16LE(PROGRAM_HEADER, 54); // e_phentsize
  file.writeUInt16LE(1, 56); // e_phnum (no section headers)
  file.writeUInt32LE(1, ELF_HEADER); // p_type: PT_LOAD
  file.writeUInt32LE(5, ELF_HEADER + 4); // p_flags: read, execute
  file.writeBigUInt64LE(BigInt(BASE), ELF_HEADER + 16); // p_vaddr
  file.writeBigUInt64LE(BigInt(BASE), ELF_HEADER + 24); // p_paddr
  file.writeBigUInt64LE(BigInt(file.length), ELF_HEADER + 32); // p_filesz
  file.writeBigUInt64LE(BigInt(file.length), ELF_HEADER + 40); // p_memsz
  file.writeBigUInt64LE(0x10000n, ELF_HEADER + 48); // p_align
  file.set(code, start);
  return file;
}

/** A ustar archive of one executable file owned by root, dated 0 so its hash depends on its content alone. */
function tar(name: string, content: Buffer): Buffer {
  const header = Buffer.alloc(512);
  header.write(name, 0);
  header.write('0000755\0', 100); // mode
  header.write('0000000\0', 108); // uid
  header.write('0000000\0', 116); // gid
  header.write(`${content.length.toString(8).padStart(11, '0')}\0`, 124); // size
  header.write('00000000000\0', 136); // mtime
  header.write('        ', 148); // the checksum counts its own field as spaces
  header.write('0', 156); // a regular file
  header.write('ustar\0' + '00', 257);
  const sum = header.reduce((total, byte) => total + byte, 0);
  header.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148);
  const padding = Buffer.alloc((512 - (content.length % 512)) % 512);
  return Buffer.concat([header, content, padding, Buffer.alloc(1024)]);
}

function words(instructions: number[]): number[] {
  const out = Buffer.alloc(instructions.length * 4);
  instructions.forEach((w, i) => {
    out.writeUInt32LE(w, i * 4);
  });
  return [...out];
}
