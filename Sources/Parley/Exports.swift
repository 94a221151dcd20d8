import ParleyCore
