/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * A process of the default path's tests (test/peer/ifunc_peer_node, or
 * another program that prints "WORD key=value ..." lines), driven through
 * its stdin and read line by line: test_peer.cc, test_edge.cc.
 */
#ifndef UCX_IFUNC_TEST_NODE_H_
#define UCX_IFUNC_TEST_NODE_H_

#include "target.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char **environ;

namespace test {

inline constexpr double kLineTimeout =
        120; /* seconds; never reached when it works */

inline std::string node_program()
{
    const char *value = getenv("IFUNC_TEST_PEER_NODE");
    return (value && *value) ? value : UCX_IFUNC_TEST_PEER_NODE;
}

/* UCX_TLS of a transport under test: "sm" as an application on one host
 * that keeps TCP for its other work would set it (UCX_TLS=sm alone, which
 * the ifunc worker lets TCP into for connecting by address, is tested by
 * PeerSharedMemoryAlone in test_peer.cc). */
inline std::string tls_of(const std::string &transport)
{
    return (transport == "sm") ? "sm,self,tcp" : "tcp";
}

using Fields = std::map<std::string, std::string>;

/* The key=value words of a line. */
inline Fields fields_of(const std::string &line)
{
    Fields             fields;
    std::istringstream words(line);
    for (std::string word; words >> word;) {
        size_t equal = word.find('=');
        if (equal != std::string::npos) {
            fields[word.substr(0, equal)] = word.substr(equal + 1);
        }
    }
    return fields;
}

inline uint64_t number(const Fields &fields, const std::string &key)
{
    auto it = fields.find(key);
    if (it == fields.end()) {
        throw std::runtime_error("no field " + key);
    }
    return std::stoull(it->second);
}

/* One ifunc_peer_node process: its stdin, and its stdout and stderr read
 * line by line. */
class Node {
public:
    Node(const std::string &name, const std::string &tls,
         const std::vector<std::string> &args,
         const std::vector<std::string> &extra_env = {},
         const std::string              &program   = node_program())
        : name_(name)
    {
        /* Everything exec needs is made before fork. */
        std::vector<std::string> argv_text = {program};
        argv_text.insert(argv_text.end(), args.begin(), args.end());
        std::vector<std::string> env_text = {
                "UCX_TLS=" + tls, "UCX_IFUNC_LIB_DIR=" + ifunc_lib_dir()};
        env_text.insert(env_text.end(), extra_env.begin(), extra_env.end());
        for (char **e = environ; *e != nullptr; ++e) {
            std::string entry = *e;
            if ((entry.rfind("UCX_TLS=", 0) != 0) &&
                (entry.rfind("UCX_IFUNC_LIB_DIR=", 0) != 0)) {
                env_text.push_back(entry);
            }
        }
        std::vector<char *> argv, envp;
        for (std::string &a : argv_text) {
            argv.push_back(a.data());
        }
        argv.push_back(nullptr);
        for (std::string &e : env_text) {
            envp.push_back(e.data());
        }
        envp.push_back(nullptr);
        int in[2], out[2];
        if ((pipe2(in, O_CLOEXEC) != 0) || (pipe2(out, O_CLOEXEC) != 0)) {
            throw std::runtime_error("pipe failed");
        }
        pid_ = fork();
        if (pid_ == 0) {
            dup2(in[0], STDIN_FILENO);
            dup2(out[1], STDOUT_FILENO);
            dup2(out[1], STDERR_FILENO);
            execve(argv[0], argv.data(), envp.data());
            _exit(127);
        }
        close(in[0]);
        close(out[1]);
        if (pid_ < 0) {
            close(in[1]);
            close(out[0]);
            throw std::runtime_error("fork failed");
        }
        in_  = in[1];
        out_ = out[0];
        fcntl(out_, F_SETFL, O_NONBLOCK);
    }

    ~Node()
    {
        if (pid_ > 0) {
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
        close_input();
        if (out_ >= 0) {
            close(out_);
        }
    }

    Node(const Node &)            = delete;
    Node &operator=(const Node &) = delete;

    void send(const std::string &line)
    {
        std::string text = line + "\n";
        if (write(in_, text.data(), text.size()) != ssize_t(text.size())) {
            throw std::runtime_error(name_ + ": writing '" + line + "' failed");
        }
    }

    void close_input()
    {
        if (in_ >= 0) {
            close(in_);
            in_ = -1;
        }
    }

    /* The fields of the next line that starts with @a word; lines before it
     * (UCX's log among them) are kept for the failure message. Throws if
     * the node exits or @a timeout seconds pass first. */
    Fields expect(const std::string &word, double timeout = kLineTimeout)
    {
        auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(long(timeout * 1000));
        for (;;) {
            size_t end;
            while ((end = pending_.find('\n')) != std::string::npos) {
                std::string line = pending_.substr(0, end);
                pending_.erase(0, end + 1);
                log_ += line + "\n";
                if ((line == word) || (line.rfind(word + " ", 0) == 0)) {
                    return fields_of(line);
                }
            }
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0) {
                throw std::runtime_error(name_ + ": no '" + word +
                                         "' in time; its output:\n" + log_);
            }
            pollfd fd = {out_, POLLIN, 0};
            poll(&fd, 1, int(std::min<long>(left.count(), 100)));
            char    chunk[4096];
            ssize_t n = read(out_, chunk, sizeof(chunk));
            if (n > 0) {
                pending_.append(chunk, size_t(n));
            } else if (n == 0) {
                throw std::runtime_error(name_ + ": exited before '" + word +
                                         "'; its output:\n" + log_ + pending_);
            }
        }
    }

    void kill9()
    {
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
        pid_ = -1;
    }

    /* The exit status, once it exited (killed after @a timeout seconds:
     * then -1). */
    int wait_exit(double timeout = kLineTimeout)
    {
        auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(long(timeout * 1000));
        int status = 0;
        while (waitpid(pid_, &status, WNOHANG) == 0) {
            if (std::chrono::steady_clock::now() > deadline) {
                kill9();
                return -1;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }

    const std::string &log() const { return log_; }
    pid_t              pid() const { return pid_; }

private:
    std::string name_;
    pid_t       pid_ = -1;
    int         in_  = -1;
    int         out_ = -1;
    std::string pending_;
    std::string log_;
};

/* The address of a node listening on @a port of 127.0.0.1. */
inline std::string address(unsigned port)
{
    return "127.0.0.1:" + std::to_string(port);
}

} // namespace test

#endif
